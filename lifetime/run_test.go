package lifetime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
)

// envRunHelper makes this test binary a run participant
// (TestRunHelperProcess) on the run file it names.
const envRunHelper = "LIFETIME_RUN_HELPER"

// TestRunHelperProcess is not a test: started by the tests below as a
// process of its own, it joins the run file named by envRunHelper
// (logging "start" or "attach" to the run file's ".log"), prints
// "joined <generation>", and leaves once its stdin closes (logging "leave
// last=<bool>"), as a test binary of a `go test ./...` would.
func TestRunHelperProcess(t *testing.T) {
	path := os.Getenv(envRunHelper)
	if path == "" {
		// Not a test of its own (make ci must never count a skip):
		// the run tests start it as a helper process.
		t.Log("a helper process of the run tests: nothing to do when not started by them")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(path+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		defer f.Close()
		_, err = fmt.Fprintf(f, format+"\n", args...)
		require.NoError(t, err)
	}
	p, err := Join(ctx, path, func(_ context.Context, run Run, stale []byte) ([]byte, error) {
		logf("start %s stale=%s", run.ID, stale)
		return json.Marshal(map[string]int{"by": os.Getpid()})
	}, func(_ context.Context, run Run, data []byte) error {
		logf("attach %s data=%s", run.ID, data)
		return nil
	})
	require.NoError(t, err)
	fmt.Printf("joined %s\n", p.Run().ID)
	_, _ = io.Copy(io.Discard, os.Stdin)
	require.NoError(t, p.Leave(ctx, func(_ context.Context, data []byte, last bool) ([]byte, error) {
		logf("leave last=%t", last)
		if last && os.Getenv(envRunHelper+"_KEEP") == "1" {
			return []byte(`"kept"`), nil
		}
		return nil, nil
	}))
}

// participant is a helper process taking part in a run.
type participant struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	id    string
	done  chan error
}

// join starts a helper process on the run file path and waits until it
// has joined.
func join(t *testing.T, path string, env ...string) *participant {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), envRunHelper+"="+path), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &participant{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	joined := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "joined "); ok {
				joined <- id
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case p.id = <-joined:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("helper %d ended before it joined: %v", cmd.Process.Pid, err)
	case <-time.After(time.Minute):
		t.Fatalf("helper %d did not join within a minute", cmd.Process.Pid)
	}
	return p
}

// leave makes the helper leave and waits until it has exited.
func (p *participant) leave(t *testing.T) {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	select {
	case err := <-p.done:
		p.done <- err
		require.NoError(t, err, "helper %d left", p.cmd.Process.Pid)
	case <-time.After(time.Minute):
		t.Fatalf("helper %d did not leave within a minute", p.cmd.Process.Pid)
	}
}

// kill ends the helper with SIGKILL, without leaving, and reaps it.
func (p *participant) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	err := <-p.done
	p.done <- err
}

// runLog is what the helpers logged on the run file at path.
func runLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path + ".log")
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// runAliveNow is RunLiveness's verdict on the run of generation id at
// path, here and now.
func runAliveNow(t *testing.T, path, id string) (bool, error) {
	t.Helper()
	self, err := CurrentProcess()
	require.NoError(t, err)
	o := Owner{Run: Run{BootID: self.BootID, Path: path, ID: id}}
	got, err := RunLiveness().Alive(context.Background(), []Owner{o})
	return Verdict(got, err, o)
}

// TestRunJoinedAtOnceStartsOnce: processes that join one run at the same
// instant start it once; the others attach to that generation, and
// exactly one of them, the last to leave, is told it is last.
func TestRunJoinedAtOnceStartsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.run")
	const n = 6
	ps := make([]*participant, n)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() { ps[i] = join(t, path) })
	}
	wg.Wait()
	for _, p := range ps {
		require.NotNil(t, p)
		assert.Equal(t, ps[0].id, p.id, "one generation")
	}
	log := runLog(t, path)
	assert.Equal(t, 1, countPrefix(log, "start "), "started once: %q", log)
	assert.Equal(t, n-1, countPrefix(log, "attach "+ps[0].id+` data={"by":`), "the others attach to what it recorded: %q", log)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the record is the user's alone")

	for _, p := range ps {
		wg.Go(func() { p.leave(t) })
	}
	wg.Wait()
	log = runLog(t, path)
	assert.Equal(t, 1, countPrefix(log, "leave last=true"), "one last one out: %q", log)
	assert.Equal(t, n-1, countPrefix(log, "leave last=false"), "%q", log)
	alive, err := runAliveNow(t, path, ps[0].id)
	require.NoError(t, err)
	assert.False(t, alive, "a run nobody takes part in is dead")
}

// TestRunHandover: a participant leaving while another stays keeps the
// run (and its record) for a newcomer; once the last has left, the next
// one starts a new generation, given what the last one kept as stale.
func TestRunHandover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.run")
	a := join(t, path)
	b := join(t, path)
	a.leave(t)
	alive, err := runAliveNow(t, path, a.id)
	require.NoError(t, err)
	assert.True(t, alive, "B still takes part")
	c := join(t, path)
	assert.Equal(t, a.id, c.id, "a newcomer joins the running generation")
	b.leave(t)
	c.leave(t)
	d := join(t, path, envRunHelper+"_KEEP=1")
	assert.NotEqual(t, a.id, d.id, "a new generation after the last one left")
	d.leave(t)
	e := join(t, path)
	defer e.leave(t)
	log := runLog(t, path)
	assert.Equal(t, []string{
		"start " + a.id + " stale=", "attach " + a.id, "leave last=false", "attach " + a.id, "leave last=false", "leave last=true",
		"start " + d.id + " stale=", "leave last=true",
		"start " + e.id + ` stale="kept"`,
	}, trimData(log))
}

// trimData cuts the data off attach lines.
func trimData(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i], _, _ = strings.Cut(l, " data=")
	}
	return out
}

// TestRunLiveness judges runs through real processes and real locks:
// alive while a participant lives, dead once every participant was
// killed (no Leave), or for another generation, or another boot.
func TestRunLiveness(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.run")
	ps := []*participant{join(t, path), join(t, path), join(t, path)}
	id := ps[0].id
	self, err := CurrentProcess()
	require.NoError(t, err)

	alive, err := runAliveNow(t, path, id)
	require.NoError(t, err)
	assert.True(t, alive, "participants live")
	alive, err = runAliveNow(t, path, "0123456789abcdef")
	require.NoError(t, err)
	assert.False(t, alive, "another generation of the same run file is over")
	o := Owner{Run: Run{BootID: "00000000-0000-0000-0000-000000000000", Path: path, ID: id}}
	got, err := RunLiveness().Alive(context.Background(), []Owner{o})
	require.NoError(t, err)
	assert.Equal(t, map[Owner]bool{o: false}, got, "a previous boot")

	unlock, err := lockCreation(context.Background(), path)
	require.NoError(t, err)
	ps[0].kill(t)
	ps[1].kill(t)
	alive, err = runAliveNow(t, path, id)
	require.NoError(t, err)
	assert.True(t, alive, "one participant is left")
	ps[2].kill(t)
	alive, err = runAliveNow(t, path, id)
	require.NoError(t, err)
	assert.True(t, alive, "a join or leave under way (the creation lock is taken) is never judged")
	unlock()
	alive, err = runAliveNow(t, path, id)
	require.NoError(t, err)
	assert.False(t, alive, "every participant was killed: the kernel dropped their locks")

	alive, err = runAliveNow(t, filepath.Join(dir, "gone.run"), id)
	require.NoError(t, err)
	assert.False(t, alive, "a run file removed from a directory the janitor sees")
	_, err = runAliveNow(t, filepath.Join(dir, "nodir", "x.run"), id)
	assert.ErrorContains(t, err, "cannot be observed from here", "no verdict where the run's file system is not visible")

	// Judge routes a run owner to RunLiveness, whatever its Name.
	o = Owner{Name: "roboco-shared", Run: Run{BootID: self.BootID, Path: path, ID: id}}
	verdicts, err := Judge(context.Background(), []Owner{o}, runtime.Snapshot{})
	require.NoError(t, err)
	assert.Equal(t, map[Owner]bool{o: false}, verdicts)
}

func TestRunFromLabels(t *testing.T) {
	k := labels.For("x")
	full := Run{BootID: "b00t", Path: "/tmp/x.run", ID: "abc"}.Labels(k.Prefix)
	with := func(key, val string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		m[key] = val
		return m
	}
	tests := []struct {
		name    string
		labels  map[string]string
		want    Owner
		wantErr string
	}{
		{name: "Full", labels: full, want: Owner{Run: Run{BootID: "b00t", Path: "/tmp/x.run", ID: "abc"}}},
		{name: "RelativePath", labels: with(k.OwnerRun, "x.run"), wantErr: "not an absolute path"},
		{name: "NoGeneration", labels: with(k.OwnerRunID, ""), wantErr: "run.id is missing"},
		{name: "NoBoot", labels: with(k.OwnerBoot, ""), wantErr: "owner.boot is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromLabels(k, tt.labels)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrMalformedOwner)
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.False(t, got.IsContainer())
		})
	}
}
