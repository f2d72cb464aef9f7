package lifetime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/labels"
)

func TestCurrentProcess(t *testing.T) {
	p, err := CurrentProcess()
	require.NoError(t, err, "the process owner is read from /proc")
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(boot)), p.BootID)
	assert.Equal(t, os.Getpid(), p.PID)
	assert.NotZero(t, p.Start)
	assert.NotZero(t, p.PIDNS)

	lbls, err := ProcessOwnerLabels("sbx")
	require.NoError(t, err)
	k := labels.For("sbx")
	assert.Equal(t, map[string]string{
		k.OwnerBoot:  p.BootID,
		k.OwnerPIDNS: strconv.FormatUint(p.PIDNS, 10),
		k.OwnerPID:   strconv.Itoa(p.PID),
		k.OwnerStart: strconv.FormatUint(p.Start, 10),
	}, lbls)

	back, ok, err := processFromLabels(k, lbls)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, p, back, "labels round-trip")
}

func TestProcessFromLabels(t *testing.T) {
	k := labels.For("x")
	full := Process{BootID: "b00t", PIDNS: 7, PID: 42, Start: 99}.Labels(k.Prefix)
	without := func(key string) map[string]string {
		m := make(map[string]string)
		for k, v := range full {
			if k != key {
				m[k] = v
			}
		}
		return m
	}
	with := func(key, val string) map[string]string {
		m := without(key)
		m[key] = val
		return m
	}
	tests := []struct {
		name    string
		labels  map[string]string
		want    Process
		present bool
		wantErr string
	}{
		{name: "NoProcessLabels", labels: map[string]string{k.Owner: "x-agent-1"}},
		{name: "Full", labels: full, want: Process{BootID: "b00t", PIDNS: 7, PID: 42, Start: 99}, present: true},
		{name: "NamespaceOptional", labels: without(k.OwnerPIDNS), want: Process{BootID: "b00t", PID: 42, Start: 99}, present: true},
		{name: "PIDNotANumber", labels: with(k.OwnerPID, "forty-two"), present: true, wantErr: "not a pid"},
		{name: "PIDZero", labels: with(k.OwnerPID, "0"), present: true, wantErr: "not a pid"},
		{name: "StartMissing", labels: without(k.OwnerStart), present: true, wantErr: "not a start time"},
		{name: "BootEmpty", labels: with(k.OwnerBoot, ""), present: true, wantErr: "boot is missing or empty"},
		{name: "OtherPrefixIgnored", labels: Process{BootID: "b", PID: 1, Start: 1}.Labels("y")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, present, err := processFromLabels(k, tt.labels)
			assert.Equal(t, tt.present, present)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestProcessLivenessOnThisHost judges real processes through the real
// /proc: this test process, a reused pid (same pid, other start time), a
// process that has exited, and a previous boot.
func TestProcessLivenessOnThisHost(t *testing.T) {
	self, err := CurrentProcess()
	require.NoError(t, err, "the process owner is read from /proc")

	child := exec.Command("sleep", "60")
	require.NoError(t, child.Start())
	_, childStart, err := readStat(fmt.Sprintf("/proc/%d/stat", child.Process.Pid))
	require.NoError(t, err)
	running := Process{BootID: self.BootID, PIDNS: self.PIDNS, PID: child.Process.Pid, Start: childStart}
	require.NoError(t, child.Process.Kill())
	_ = child.Wait() // reaped: its pid no longer exists
	exited := running

	living := exec.Command("sleep", "60")
	require.NoError(t, living.Start())
	t.Cleanup(func() { _ = living.Process.Kill(); _ = living.Wait() })
	_, livingStart, err := readStat(fmt.Sprintf("/proc/%d/stat", living.Process.Pid))
	require.NoError(t, err)
	alive := Process{BootID: self.BootID, PIDNS: self.PIDNS, PID: living.Process.Pid, Start: livingStart}

	tests := []struct {
		name string
		p    Process
		want bool
	}{
		{name: "ThisProcessIsAlive", p: self, want: true},
		{name: "LivingChildIsAlive", p: alive, want: true},
		{name: "UnknownNamespaceMeansOurs", p: Process{BootID: self.BootID, PID: self.PID, Start: self.Start}, want: true},
		{name: "ExitedProcessIsDead", p: exited, want: false},
		{name: "ReusedPIDIsDead", p: Process{BootID: self.BootID, PIDNS: self.PIDNS, PID: self.PID, Start: self.Start + 1}, want: false},
		{name: "PreviousBootIsDead", p: Process{BootID: "00000000-0000-0000-0000-000000000000", PIDNS: self.PIDNS, PID: self.PID, Start: self.Start}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Owner{Name: "whatever", Process: tt.p}
			got, err := ProcessLiveness().Alive(context.Background(), []Owner{o})
			require.NoError(t, err)
			v, ok := got[o]
			require.True(t, ok, "a verdict for every process owner")
			assert.Equal(t, tt.want, v)
		})
	}
}

// fakeProc builds a /proc tree under t.TempDir(): the caller's own
// identity plus the given processes.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T, boot string, selfNS uint64, selfPID int) *fakeProc {
	f := &fakeProc{t: t, root: t.TempDir()}
	f.write("sys/kernel/random/boot_id", boot+"\n")
	f.addAt("self", selfNS, selfPID, selfPID, 1000)
	return f
}

func (f *fakeProc) write(rel, content string) {
	path := filepath.Join(f.root, rel)
	require.NoError(f.t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(f.t, os.WriteFile(path, []byte(content), 0o644))
}

// add creates /proc/<outer> for a process whose pid in its own namespace
// ns is inner, started at start.
func (f *fakeProc) add(outer int, ns uint64, inner int, start uint64) {
	f.addAt(strconv.Itoa(outer), ns, outer, inner, start)
}

func (f *fakeProc) addAt(dir string, ns uint64, outer, inner int, start uint64) {
	// Field 2 holds a name with spaces and parentheses, as real ones may.
	fields := make([]string, 0, 20)
	fields = append(fields, "S")
	for i := 4; i <= 21; i++ {
		fields = append(fields, "0")
	}
	fields = append(fields, strconv.FormatUint(start, 10), "0", "0")
	f.write(filepath.Join(dir, "stat"), fmt.Sprintf("%d (a (b) c) %s\n", outer, strings.Join(fields, " ")))
	f.write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\tx\nNSpid:\t%d\t%d\n", outer, inner))
	require.NoError(f.t, os.MkdirAll(filepath.Join(f.root, dir, "ns"), 0o755))
	require.NoError(f.t, os.Symlink(fmt.Sprintf("pid:[%d]", ns), filepath.Join(f.root, dir, "ns", "pid")))
}

// unreadable adds a process whose namespace link cannot be read (as for
// another user's process when the janitor is not root).
func (f *fakeProc) unreadable(outer int) {
	f.write(filepath.Join(strconv.Itoa(outer), "ns", "pid"), "not a link")
}

func TestProcessLivenessAcrossPIDNamespaces(t *testing.T) {
	const (
		boot    = "b00t"
		jobNS   = 4026532000 // a CI job container's pid namespace
		otherNS = 4026532111
	)
	owner := Process{BootID: boot, PIDNS: jobNS, PID: 7, Start: 500}
	tests := []struct {
		name   string
		selfNS uint64
		setup  func(f *fakeProc)
		want   bool
	}{
		{
			name: "SeenInItsNamespaceIsAlive", selfNS: initPIDNS,
			setup: func(f *fakeProc) { f.add(4321, jobNS, 7, 500) },
			want:  true,
		},
		{
			name: "SamePIDOtherStartIsDead", selfNS: initPIDNS,
			setup: func(f *fakeProc) { f.add(4321, jobNS, 7, 501) },
			want:  false,
		},
		{
			name: "SamePIDOtherNamespaceIsDead", selfNS: initPIDNS,
			setup: func(f *fakeProc) { f.add(4321, otherNS, 7, 500) },
			want:  false,
		},
		{
			name: "GoneSeenFromInitialNamespaceIsDead", selfNS: initPIDNS,
			setup: func(f *fakeProc) {},
			want:  false,
		},
		{
			name: "GoneSeenFromAnotherNamespaceIsKept", selfNS: otherNS,
			setup: func(f *fakeProc) {},
			want:  true,
		},
		{
			name: "GoneButSomeNamespacesUnreadableIsKept", selfNS: initPIDNS,
			setup: func(f *fakeProc) { f.unreadable(999) },
			want:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProc(t, boot, tt.selfNS, 1)
			tt.setup(f)
			o := Owner{Process: owner}
			got, err := processLiveness{&procfs{root: f.root}}.Alive(context.Background(), []Owner{o})
			require.NoError(t, err)
			assert.Equal(t, map[Owner]bool{o: tt.want}, got)
		})
	}
}

func TestReadStatParsesAwkwardNames(t *testing.T) {
	f := newFakeProc(t, "b", initPIDNS, 1)
	f.add(77, initPIDNS, 77, 123456)
	pid, start, err := readStat(filepath.Join(f.root, "77", "stat"))
	require.NoError(t, err)
	assert.Equal(t, 77, pid)
	assert.Equal(t, uint64(123456), start)
}
