package lifetime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/roboco/sandboxer/labels"
)

// Process identifies one process on one boot of one host, so that a
// sandbox owned by a process (the CLI's `run`, a Go test helper) can be
// kept exactly as long as that process lives. A pid alone is not enough:
// pids are reused, and they are only meaningful within a boot and a pid
// namespace.
type Process struct {
	// BootID is /proc/sys/kernel/random/boot_id: it changes on every boot.
	BootID string
	// PIDNS is the inode of the process's pid namespace (0: unknown).
	PIDNS uint64
	// PID is the process id inside that pid namespace.
	PID int
	// Start is field 22 of /proc/<pid>/stat: the process's start time in
	// clock ticks after boot. With the pid it tells a process from a later
	// one that reused its pid.
	Start uint64
}

// IsZero reports whether p is the zero Process (no process identity).
func (p Process) IsZero() bool { return p == Process{} }

// String renders "pid 1234 (start 5678, pidns 4026531836, boot 0c1d...)".
func (p Process) String() string {
	return fmt.Sprintf("pid %d (start %d, pidns %d, boot %s)", p.PID, p.Start, p.PIDNS, p.BootID)
}

// Labels returns the labels that mark a sandbox as owned by p, for a
// provisioner to add to every container it runs for p: the process-owner
// keys of labels.For(prefix) (boot id, pid namespace, pid, start time).
// They complement, not replace, the owner container label: when they are
// present, the janitor judges the owner by the process alone.
func (p Process) Labels(prefix string) map[string]string {
	k := labels.For(prefix)
	return map[string]string{
		k.OwnerBoot:  p.BootID,
		k.OwnerPIDNS: strconv.FormatUint(p.PIDNS, 10),
		k.OwnerPID:   strconv.Itoa(p.PID),
		k.OwnerStart: strconv.FormatUint(p.Start, 10),
	}
}

// CurrentProcess returns the identity of the calling process. It reads
// /proc and so works on Linux only; elsewhere it returns an error, and a
// caller should then fall back to a container owner or to an explicit
// teardown.
func CurrentProcess() (Process, error) {
	return localProc.current()
}

// ProcessOwnerLabels returns CurrentProcess().Labels(prefix): the labels a
// provisioner adds to sandboxes owned by the calling process.
func ProcessOwnerLabels(prefix string) (map[string]string, error) {
	p, err := CurrentProcess()
	if err != nil {
		return nil, err
	}
	return p.Labels(prefix), nil
}

// processFromLabels extracts a process identity from a sandbox's labels.
// ok is false when the sandbox carries no process identity at all; err is
// non-nil when it carries a partial or malformed one.
func processFromLabels(k labels.Keys, lbls map[string]string) (p Process, ok bool, err error) {
	pid, hasPID := lbls[k.OwnerPID]
	boot := lbls[k.OwnerBoot]
	start, hasStart := lbls[k.OwnerStart]
	ns, hasNS := lbls[k.OwnerPIDNS]
	if !hasPID && !hasStart && !hasNS {
		// The boot id alone is not a process: a run owner has one too.
		return Process{}, false, nil
	}
	p.BootID = boot
	if p.PID, err = strconv.Atoi(pid); err != nil || p.PID <= 0 {
		return Process{}, true, fmt.Errorf("process owner label %s=%q: not a pid", k.OwnerPID, pid)
	}
	if p.Start, err = strconv.ParseUint(start, 10, 64); err != nil {
		return Process{}, true, fmt.Errorf("process owner label %s=%q: not a start time", k.OwnerStart, start)
	}
	if hasNS {
		if p.PIDNS, err = strconv.ParseUint(ns, 10, 64); err != nil {
			return Process{}, true, fmt.Errorf("process owner label %s=%q: not a namespace inode", k.OwnerPIDNS, ns)
		}
	}
	if boot == "" {
		return Process{}, true, fmt.Errorf("process owner label %s is missing or empty", k.OwnerBoot)
	}
	return p, true, nil
}

// initPIDNS is the inode of the initial pid namespace (PROC_PID_INIT_INO in
// the kernel): a process in it sees every process of the host.
const initPIDNS = 0xEFFFFFFC

// procfs reads process identities from a proc filesystem mounted at root
// (a fake tree in tests).
type procfs struct {
	root string

	once    sync.Once
	self    Process
	selfErr error
}

var localProc = &procfs{root: "/proc"}

func (f *procfs) current() (Process, error) {
	f.once.Do(func() { f.self, f.selfErr = f.readSelf() })
	return f.self, f.selfErr
}

func (f *procfs) readSelf() (Process, error) {
	boot, err := os.ReadFile(filepath.Join(f.root, "sys/kernel/random/boot_id"))
	if err != nil {
		return Process{}, fmt.Errorf("lifetime: process identity: boot id: %w", err)
	}
	ns, err := readNS(filepath.Join(f.root, "self/ns/pid"))
	if err != nil {
		return Process{}, fmt.Errorf("lifetime: process identity: pid namespace: %w", err)
	}
	pid, start, err := readStat(filepath.Join(f.root, "self/stat"))
	if err != nil {
		return Process{}, fmt.Errorf("lifetime: process identity: %w", err)
	}
	return Process{BootID: strings.TrimSpace(string(boot)), PIDNS: ns, PID: pid, Start: start}, nil
}

// alive decides, for each process, whether it is alive as seen from this
// host. The rules, in order:
//   - a different boot id: dead. A host-mode sandbox publishes its ports on
//     127.0.0.1 of the runtime's host, so a process that can use it lives
//     on that host, and a different boot id means that host has rebooted
//     since: the process is gone.
//   - our own pid namespace (or an unknown one): alive exactly when
//     /proc/<pid>/stat exists and shows the same start time.
//   - another pid namespace: alive when some visible process lives in that
//     namespace under that pid with that start time. When none is found,
//     dead only if this process sees every process of the host (it is in
//     the initial pid namespace and could read every namespace link);
//     otherwise the owner cannot be observed from here and is taken as
//     alive: a long `run` must never lose its databases to a janitor that
//     cannot see it.
func (f *procfs) alive(ps []Process) (map[Process]bool, error) {
	self, err := f.current()
	if err != nil {
		return nil, err
	}
	out := make(map[Process]bool, len(ps))
	var foreign []Process
	for _, p := range ps {
		switch {
		case p.BootID != self.BootID:
			out[p] = false
		case p.PIDNS == 0 || p.PIDNS == self.PIDNS:
			_, start, err := readStat(filepath.Join(f.root, strconv.Itoa(p.PID), "stat"))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				out[p] = false
			case err != nil:
				return out, err
			default:
				out[p] = start == p.Start
			}
		default:
			foreign = append(foreign, p)
		}
	}
	if len(foreign) == 0 {
		return out, nil
	}
	seen, complete, err := f.scan(foreign)
	if err != nil {
		return out, err
	}
	for _, p := range foreign {
		out[p] = seen[p] || !(complete && self.PIDNS == initPIDNS)
	}
	return out, nil
}

// scan walks every visible process once and reports which of want it
// found (same pid namespace, same innermost pid, same start time).
// complete is false when some process's namespace could not be read (not
// ours to inspect): then "not found" proves nothing.
func (f *procfs) scan(want []Process) (found map[Process]bool, complete bool, err error) {
	byNS := make(map[uint64][]Process)
	for _, p := range want {
		byNS[p.PIDNS] = append(byNS[p.PIDNS], p)
	}
	entries, err := os.ReadDir(f.root)
	if err != nil {
		return nil, false, fmt.Errorf("lifetime: scan processes: %w", err)
	}
	found = make(map[Process]bool)
	complete = true
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(f.root, e.Name())
		ns, err := readNS(filepath.Join(dir, "ns/pid"))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // exited meanwhile: nothing lost
				complete = false
			}
			continue
		}
		candidates := byNS[ns]
		if len(candidates) == 0 {
			continue
		}
		inner, err := readInnerPID(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		_, start, err := readStat(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		for _, p := range candidates {
			if p.PID == inner && p.Start == start {
				found[p] = true
			}
		}
	}
	return found, complete, nil
}

// readNS reads a namespace link ("pid:[4026531836]") and returns its inode.
func readNS(path string) (uint64, error) {
	link, err := os.Readlink(path)
	if err != nil {
		return 0, err
	}
	lo, hi := strings.IndexByte(link, '['), strings.LastIndexByte(link, ']')
	if lo < 0 || hi < lo {
		return 0, fmt.Errorf("%s: unexpected namespace link %q", path, link)
	}
	return strconv.ParseUint(link[lo+1:hi], 10, 64)
}

// readStat returns the pid (field 1) and start time (field 22) of a
// /proc/<pid>/stat file. The command name (field 2) is parenthesised and
// may itself contain spaces and parentheses, so fields are counted from
// the last ')'.
func readStat(path string) (pid int, start uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	lo, hi := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if lo < 1 || hi < lo {
		return 0, 0, fmt.Errorf("%s: malformed stat", path)
	}
	if pid, err = strconv.Atoi(string(bytes.TrimSpace(b[:lo]))); err != nil {
		return 0, 0, fmt.Errorf("%s: malformed pid: %w", path, err)
	}
	rest := strings.Fields(string(b[hi+1:])) // rest[0] is field 3
	const startField = 22 - 3
	if len(rest) <= startField {
		return 0, 0, fmt.Errorf("%s: stat has %d fields, want at least 22", path, len(rest)+2)
	}
	if start, err = strconv.ParseUint(rest[startField], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%s: malformed start time: %w", path, err)
	}
	return pid, start, nil
}

// readInnerPID returns the last pid of the NSpid line of a
// /proc/<pid>/status file: the process's pid in its own pid namespace.
func readInnerPID(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			return strconv.Atoi(fields[len(fields)-1])
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no NSpid line", path)
}
