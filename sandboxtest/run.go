package sandboxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// EnvRunDir names the variable that sets the directory of the run files
// (default: sandboxer/runs in os.UserCacheDir). Test binaries share a
// shared sandbox when they find it through the same directory.
const EnvRunDir = "SANDBOXTEST_RUN_DIR"

// A shared sandbox of a run (the default; Options.PerBinary opts out) is
// shared by every test binary of the user's that runs meanwhile with the
// same Options on this host: the test binaries of one `go test ./...`
// that overlap. Its run file (lifetime.Join) is
// <run dir>/<hash of the shared key>.run: each binary that uses the
// sandbox holds a shared lock on it until Main, or until it dies; the
// first one starts the sandbox under the run's creation lock and records
// it there (runRecord, mode 0600: it holds the password, which is
// nowhere else), the others attach to it, and the last one out tears it
// down. The sandbox carries the run's owner labels (lifetime.Run), so a
// janitor removes it once every binary that used it has died.

// runRecord is what a run file records of its shared sandbox, for the
// test binaries that attach to it.
type runRecord struct {
	// OwnerID is the sandbox's provision owner id, for its teardown.
	OwnerID string `json:"owner_id"`
	// Owner is the owner label's value.
	Owner string `json:"owner"`
	// Runtime is the runtime it runs on ("docker").
	Runtime string `json:"runtime"`
	// Containers are its containers (one).
	Containers []provision.Container `json:"containers"`
	// Env is what it emitted, passwords included.
	Env []engines.EnvVar `json:"env"`
	// Kept is set once a test binary kept a database of a failed test on
	// it: the last one out then leaves it running, and the next run
	// starts a sandbox of its own.
	Kept bool `json:"kept,omitempty"`
}

// runPath is the run file of the shared sandbox k, in the run directory
// (made, mode 0700, when missing; it must be the user's alone).
func runPath(k sharedKey) (string, error) {
	dir := os.Getenv(EnvRunDir)
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("run directory: %w", err)
		}
		dir = filepath.Join(cache, "sandboxer", "runs")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("run directory %s: owned by uid %d, not by this user (uid %d)", dir, st.Uid, os.Getuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("run directory %s: mode %s: others may write to it", dir, info.Mode().Perm())
	}
	key := enginetest.Key(k.engine, k.labelPrefix, k.envPrefix, k.images, k.runtime,
		strconv.FormatBool(k.unenforced), strconv.FormatInt(k.memory, 10), strconv.FormatFloat(k.cpus, 'g', -1, 64))
	return filepath.Join(dir, k.engine+"-"+key[:32]+".run"), nil
}

// joinRun makes s the shared sandbox of the run whose file is path under
// opts: the one it records when other test binaries use it, or a new one.
func (s *server) joinRun(opts Options, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout())
	defer cancel()
	args := map[string][]string{s.engine: s.kit.SharedArgs()}
	start := func(ctx context.Context, run lifetime.Run, stale []byte) ([]byte, error) {
		c, err := connect(ctx, opts, run.Labels(opts.labelPrefix()), "shared", args)
		if err != nil {
			return nil, err
		}
		if stale != nil {
			removeStale(ctx, c, path, stale)
		}
		st, err := c.provision(ctx, "shared-"+ids.Hex(5), []string{s.engine})
		if err != nil {
			return nil, err
		}
		if err := s.use(st); err != nil {
			_ = st.teardown()
			return nil, err
		}
		data, err := json.Marshal(runRecord{OwnerID: st.sb.OwnerID, Owner: st.sb.Owner, Runtime: st.rt.Name(), Containers: st.sb.Containers, Env: st.sb.Env})
		if err != nil {
			s.alloc.Close()
			_ = st.teardown()
			return nil, err
		}
		return data, nil
	}
	attach := func(ctx context.Context, run lifetime.Run, data []byte) error {
		var rec runRecord
		if err := json.Unmarshal(data, &rec); err != nil || len(rec.Containers) != 1 {
			return fmt.Errorf("shared %s sandbox of run file %s: unreadable record (%v)", s.engine, path, err)
		}
		c, err := connect(ctx, opts, run.Labels(opts.labelPrefix()), "shared", args)
		if err != nil {
			return err
		}
		if err := c.check(ctx, rec); err != nil {
			c.rt.Close()
			return fmt.Errorf("shared %s sandbox %s of run file %s: %w", s.engine, rec.Containers[0].Name, path, err)
		}
		st := &started{
			sb: provision.Sandbox{OwnerID: rec.OwnerID, Owner: rec.Owner, Containers: rec.Containers, Env: rec.Env},
			rt: c.rt, p: c.p, id: rec.OwnerID, envPrefix: c.envPrefix,
		}
		if err := s.use(st); err != nil {
			c.rt.Close()
			return err
		}
		return nil
	}
	part, err := lifetime.Join(ctx, path, start, attach)
	if err != nil {
		return err
	}
	s.part = part
	return nil
}

// check makes sure the recorded sandbox is one this connection can use:
// on the same runtime, and running.
func (c *connected) check(ctx context.Context, rec runRecord) error {
	if c.rt.Name() != rec.Runtime {
		return fmt.Errorf("runs on %s, and these Options reach %s", rec.Runtime, c.rt.Name())
	}
	ictx, cancel := context.WithTimeout(ctx, runtime.DefaultCallTimeout)
	defer cancel()
	got, err := c.rt.Inspect(ictx, rec.Containers[0].ID)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if got.State != runtime.StateRunning {
		return fmt.Errorf("it is %s, not running", got.State)
	}
	return nil
}

// removeStale removes the sandbox a run's previous generation left
// (every test binary that used it is gone), unless it holds databases
// kept for failed tests. A failure is only logged: the janitor removes
// it too.
func removeStale(ctx context.Context, c *connected, path string, stale []byte) {
	var rec runRecord
	if err := json.Unmarshal(stale, &rec); err != nil || rec.OwnerID == "" {
		slog.Warn("sandboxtest: unreadable record of a previous run: a janitor sweep removes its sandbox", "run", path, "err", err)
		return
	}
	if rec.Kept {
		return
	}
	if _, err := c.p.Teardown(ctx, rec.OwnerID); err != nil {
		slog.Warn("sandboxtest: remove the shared sandbox a previous run left", "run", path, "owner", rec.Owner, "err", err)
	}
}

// leaveRun ends this test binary's use of the run's shared sandbox: the
// last one out tears it down (unless it holds kept databases); the
// others first give back what their allocator made ahead.
func (s *server) leaveRun() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.timeout())
	defer cancel()
	name := s.st.sb.Containers[0].Name
	left := false
	err := s.part.Leave(ctx, func(ctx context.Context, data []byte, last bool) ([]byte, error) {
		left = true
		var rec runRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			s.alloc.Close()
			s.st.rt.Close()
			return nil, fmt.Errorf("unreadable record: %w", err)
		}
		kept := s.kept.Load()
		rec.Kept = rec.Kept || kept
		if !last {
			tctx, tcancel := context.WithTimeout(ctx, teardownTimeout)
			defer tcancel()
			if err := s.alloc.Tidy(tctx); err != nil {
				slog.Warn("sandboxtest: give back the databases made ahead", "sandbox", name, "err", err)
			}
			s.alloc.Close()
			s.st.rt.Close()
			if kept {
				return json.Marshal(rec)
			}
			return nil, nil
		}
		s.alloc.Close()
		if rec.Kept {
			fmt.Fprintf(os.Stderr, "sandboxtest: %s stays, with the databases kept for failed tests; `sandboxer gc` removes it now that no test binary uses it\n", name)
			s.st.rt.Close()
			return json.Marshal(rec)
		}
		if err := s.st.teardown(); err != nil {
			return nil, fmt.Errorf("teardown of %s: %w", name, err)
		}
		return nil, nil
	})
	if !left {
		s.alloc.Close()
		s.st.rt.Close()
	}
	return err
}
