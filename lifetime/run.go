package lifetime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/internal/poll"
	"github.com/roboco/sandboxer/labels"
)

// Run identifies one generation of a run: something several processes
// of one host share (sandboxtest's one server per engine for every test
// binary of a `go test ./...`), kept exactly as long as one of them
// takes part in it. Each participant holds a shared flock on the run
// file for as long as it lives (Join, Leave); the kernel drops it when the
// process dies, so no list of processes can go stale. A run owner is
// alive while someone holds that lock and the run file still records this
// generation (RunLiveness).
//
// Like a process owner, a run owner is local to its host: it is judged by
// locks on a file of the host's file system (a local one: flock over NFS
// is not the same lock), by a janitor that can open that file (the same
// user, or root, in the same mount namespace).
type Run struct {
	// BootID is the boot id of the run's host when it started: the run
	// cannot outlive a reboot.
	BootID string
	// Path is the run file's absolute path.
	Path string
	// ID tells this generation from an earlier or later one of the same
	// run file: random, chosen by the participant that started it.
	ID string
}

// IsZero reports whether r is the zero Run (no run identity).
func (r Run) IsZero() bool { return r == Run{} }

// String renders "run /path/file.run (id 1a2b..., boot 0c1d...)".
func (r Run) String() string {
	return fmt.Sprintf("run %s (id %s, boot %s)", r.Path, r.ID, r.BootID)
}

// Labels returns the labels that mark a sandbox as owned by r, for a
// provisioner to add to every container it runs for the run: the boot id
// and the run-owner keys of labels.For(prefix). When they are present the
// janitor judges the owner by the run alone.
func (r Run) Labels(prefix string) map[string]string {
	k := labels.For(prefix)
	return map[string]string{k.OwnerBoot: r.BootID, k.OwnerRun: r.Path, k.OwnerRunID: r.ID}
}

// runFromLabels extracts a run identity from a sandbox's labels. ok is
// false when the sandbox carries no run identity; err is non-nil when it
// carries a partial one.
func runFromLabels(k labels.Keys, lbls map[string]string) (r Run, ok bool, err error) {
	path, hasPath := lbls[k.OwnerRun]
	id, hasID := lbls[k.OwnerRunID]
	if !hasPath && !hasID {
		return Run{}, false, nil
	}
	r = Run{BootID: lbls[k.OwnerBoot], Path: path, ID: id}
	switch {
	case !filepath.IsAbs(path):
		return Run{}, true, fmt.Errorf("run owner label %s=%q: not an absolute path", k.OwnerRun, path)
	case id == "":
		return Run{}, true, fmt.Errorf("run owner label %s is missing or empty", k.OwnerRunID)
	case r.BootID == "":
		return Run{}, true, fmt.Errorf("run owner label %s is missing or empty", k.OwnerBoot)
	}
	return r, true, nil
}

// lockPoll is how often a lock that is taken is tried again.
const lockPoll = 10 * time.Millisecond

// record is what a run file holds: the generation, and what the
// participant that started it wrote for the others (Join's start).
type record struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Participant is the calling process's part in a run (Join): it holds the
// run file's shared lock until Leave, or until the process ends.
type Participant struct {
	run  Run
	file *os.File
}

// Run is the generation this participant takes part in.
func (p *Participant) Run() Run { return p.run }

// StartFunc starts what a run shares, for the first participant of a new
// generation: run is that generation (its Labels go on what it starts),
// stale what the previous generation recorded, if any (nil: none), for
// clean-up: nobody takes part in it any more. It returns what to record
// for the participants that join (JSON), in a file only the user can
// read.
type StartFunc func(ctx context.Context, run Run, stale []byte) (data []byte, err error)

// AttachFunc attaches to what a run shares, for a participant that joins
// a generation others take part in, from what its first participant
// recorded.
type AttachFunc func(ctx context.Context, run Run, data []byte) error

// Join makes the calling process a participant of the run whose file is
// path (created, mode 0600, in a directory that must exist), under the
// run's creation lock (path + ".lock"), which ctx bounds the wait for:
// when nobody else takes part, start begins a new generation and its
// data is recorded; otherwise attach gets the current generation's.
// Either runs under the lock: two processes joining at the same instant
// never both start, and a participant that is leaving (Leave) finishes
// first. When start or attach fail, the process does not take part and
// the error is returned.
func Join(ctx context.Context, path string, start StartFunc, attach AttachFunc) (*Participant, error) {
	boot, err := localProc.current()
	if err != nil {
		return nil, err
	}
	unlock, err := lockCreation(ctx, path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lifetime: join run %s: %w", path, err)
	}
	p := &Participant{file: f}
	rec, err := readRecord(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifetime: join run %s: %w", path, err)
	}
	alone, err := tryLock(f, syscall.LOCK_EX)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifetime: join run %s: %w", path, err)
	}
	if !alone {
		// Others take part: join their generation. Nobody holds the
		// exclusive lock outside the creation lock, which is ours.
		if err := lockShared(ctx, f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lifetime: join run %s: %w", path, err)
		}
		p.run = Run{BootID: boot.BootID, Path: path, ID: rec.ID}
		if rec.ID == "" {
			_ = f.Close()
			return nil, fmt.Errorf("lifetime: join run %s: others take part in it, but it records no generation", path)
		}
		if err := attach(ctx, p.run, rec.Data); err != nil {
			_ = f.Close()
			return nil, err
		}
		return p, nil
	}
	// Nobody takes part: whatever the file records is stale. A new
	// generation starts, recorded before the exclusive lock becomes a
	// shared one (not atomic, but under the creation lock, which every
	// other joiner, leaver and janitor takes first).
	p.run = Run{BootID: boot.BootID, Path: path, ID: ids.Hex(8)}
	var stale []byte
	if rec.ID != "" {
		stale = rec.Data
	}
	data, err := start(ctx, p.run, stale)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := writeRecord(f, record{ID: p.run.ID, Data: data}); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifetime: join run %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifetime: join run %s: shared lock: %w", path, err)
	}
	return p, nil
}

// LeaveFunc is called by Leave under the run's creation lock with what
// the run records and whether the calling process is its last
// participant (it then tears down what the run shares). What it returns
// is recorded instead (a later Join's start gets it as stale once nobody
// takes part); nil keeps the record as it is for the others, and leaves
// nothing recorded after the last one. When it fails, the record is kept
// as it was.
type LeaveFunc func(ctx context.Context, data []byte, last bool) ([]byte, error)

// Leave ends the calling process's part in the run, under the run's
// creation lock, which ctx bounds the wait for: it drops its shared lock
// and tries the exclusive one; the process that gets it is the last one
// out. fn (when not nil) then says what the run records from now on. A
// process that joins meanwhile waits, and then starts a new generation
// if this one was the last. Leave is not safe to call twice.
func (p *Participant) Leave(ctx context.Context, fn LeaveFunc) error {
	defer p.file.Close()
	unlock, err := lockCreation(ctx, p.run.Path)
	if err != nil {
		return err
	}
	defer unlock()
	if err := syscall.Flock(int(p.file.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("lifetime: leave run %s: %w", p.run.Path, err)
	}
	last, err := tryLock(p.file, syscall.LOCK_EX)
	if err != nil {
		return fmt.Errorf("lifetime: leave run %s: %w", p.run.Path, err)
	}
	if fn == nil {
		return nil
	}
	rec, err := readRecord(p.file)
	if err != nil {
		return fmt.Errorf("lifetime: leave run %s: %w", p.run.Path, err)
	}
	if rec.ID != p.run.ID {
		return fmt.Errorf("lifetime: leave run %s: it records generation %s, not %s", p.run.Path, rec.ID, p.run.ID)
	}
	data, err := fn(ctx, rec.Data, last)
	if err != nil {
		return err
	}
	switch {
	case data == nil && last:
		rec = record{}
	case data == nil:
		return nil // the others' record stays as it is
	default:
		rec.Data = data
	}
	if err := writeRecord(p.file, rec); err != nil {
		return fmt.Errorf("lifetime: leave run %s: %w", p.run.Path, err)
	}
	return nil
}

// RunLiveness judges owners by their Run, on this host:
//   - a different boot id: dead (the run's host has rebooted since);
//   - the run file is not where the labels say: dead when its directory
//     is there (run files are never removed by sandboxer: it was removed
//     by hand), otherwise no verdict (the janitor does not see the
//     run's file system: another host, mount namespace or user);
//   - a join or a leave under way (the creation lock is taken): alive;
//   - nobody holds the run file's lock: dead (a later Join starts a new
//     generation: this one never comes back);
//   - someone does: alive, unless the file records another generation
//     (this one ended, and a new one started).
//
// Owners with a zero Run get no verdict. The janitor needs to open the
// run file: run it as the same user as the tests, or as root.
func RunLiveness() Liveness { return runLiveness{localProc} }

type runLiveness struct{ fs *procfs }

func (l runLiveness) Alive(ctx context.Context, owners []Owner) (map[Owner]bool, error) {
	self, err := l.fs.current()
	if err != nil {
		return nil, err
	}
	out := make(map[Owner]bool, len(owners))
	var errs []error
	for _, o := range owners {
		if o.Run.IsZero() {
			continue
		}
		alive, err := runAlive(ctx, self.BootID, o.Run)
		if err != nil {
			errs = append(errs, fmt.Errorf("lifetime: %s: %w", o.Run, err))
			continue
		}
		out[o] = alive
	}
	return out, errors.Join(errs...)
}

// runAlive judges one run (see RunLiveness).
func runAlive(ctx context.Context, boot string, r Run) (bool, error) {
	if r.BootID != boot {
		return false, nil
	}
	f, err := os.Open(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(filepath.Dir(r.Path)); derr == nil {
			return false, nil
		}
		return false, fmt.Errorf("cannot be observed from here: %w", err)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	lock, err := os.Open(r.Path + ".lock")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Never joined: nobody can be joining or leaving.
	case err != nil:
		return false, err
	default:
		defer lock.Close()
		free, err := tryLock(lock, syscall.LOCK_EX)
		if err != nil {
			return false, err
		}
		if !free {
			return true, nil
		}
		defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	}
	unused, err := tryLock(f, syscall.LOCK_EX)
	if err != nil {
		return false, err
	}
	if unused {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, nil
	}
	rec, err := readRecord(f)
	if err != nil {
		return true, nil // in use, and unreadable to us: kept
	}
	return rec.ID == r.ID, nil
}

// lockCreation takes the exclusive lock on path's creation lock file,
// polling until ctx ends, and returns its release.
func lockCreation(ctx context.Context, path string) (func(), error) {
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lifetime: run lock: %w", err)
	}
	if err := lockPolling(ctx, f, syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifetime: run lock %s: %w", lockPath, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// lockShared takes the shared lock on f, polling until ctx ends: a
// janitor's probe may hold the exclusive one for an instant.
func lockShared(ctx context.Context, f *os.File) error {
	return lockPolling(ctx, f, syscall.LOCK_SH)
}

func lockPolling(ctx context.Context, f *os.File, how int) error {
	deadline, ok := ctx.Deadline()
	timeout := time.Until(deadline)
	if !ok {
		timeout = time.Duration(1<<63 - 1)
	}
	return poll.Until(ctx, timeout, lockPoll, func() error {
		got, err := tryLock(f, how)
		switch {
		case err != nil:
			return err
		case !got:
			return errors.New("held by another process")
		}
		return nil
	})
}

// tryLock tries to flock f without waiting: whether it got the lock.
func tryLock(f *os.File, how int) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return false, fmt.Errorf("flock: %w", err)
		}
	}
}

// readRecord reads what f records (the zero record when it is empty).
func readRecord(f *os.File) (record, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
	if err != nil {
		return record{}, err
	}
	var rec record
	if len(b) == 0 {
		return rec, nil
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, fmt.Errorf("read record: %w", err)
	}
	return rec, nil
}

// writeRecord replaces what f records (nothing, for the zero record).
func writeRecord(f *os.File, rec record) error {
	var b []byte
	if !rec.isZero() {
		var err error
		if b, err = json.Marshal(rec); err != nil {
			return err
		}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

func (r record) isZero() bool { return r.ID == "" && len(r.Data) == 0 }
