package podman

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

const (
	// exitCodeTimeout bounds the wait for an exec's exit code once its
	// output has ended.
	exitCodeTimeout = 10 * time.Second
	// exitCodePoll is how often that wait asks again.
	exitCodePoll = 10 * time.Millisecond
)

// Exec runs argv inside a running container, attached to its stdout and
// stderr, and waits for its exit code. A command that cannot be started
// (not found, not executable) is not an error: it gives exit code 127 or
// 126, as a shell would. An absent container is runtime.ErrNotFound.
//
// The exec session is removed afterwards where the service can (libpod API
// 4.8 and later); Podman 4.3 keeps each session's conmon for 300 s after
// the exit, which only matters to process counts on the host.
func (r *Runtime) Exec(ctx context.Context, container string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	const op = runtime.OpExec
	c, err := r.connect(ctx, op, container)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	if len(spec.Cmd) == 0 {
		return runtime.ExecResult{}, r.wrap(op, container, adapterkit.WithKind(nil, "no command given"))
	}
	cfg := execCreateConfig{AttachStdout: true, AttachStderr: true, Cmd: spec.Cmd, Env: adapterkit.EnvList(spec.Env), User: spec.User}
	id, err := c.execCreate(ctx, container, cfg)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, container, err)
	}
	defer r.removeExec(ctx, c, id)

	var stdout, stderr bytes.Buffer
	startErr := attachExec(ctx, c, id, &stdout, &stderr)
	if startErr != nil && ctx.Err() != nil {
		return runtime.ExecResult{}, r.wrap(op, container, startErr)
	}
	sess, err := waitExec(ctx, c, id)
	if err != nil {
		if startErr != nil {
			err = startErr
		}
		return runtime.ExecResult{}, r.wrap(op, container, err)
	}
	if startErr != nil {
		// The service refused to start the process: an argv that is not
		// found or not executable gets 127 or 126 recorded; anything else
		// is an error.
		if code, ok := startFailureCode(sess, startErr); ok {
			return runtime.ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
		}
		return runtime.ExecResult{}, r.wrap(op, container, startErr)
	}
	return runtime.ExecResult{ExitCode: sess.ExitCode, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// startFailureCode reports the exit code libpod recorded for an exec whose
// start failed, when that code says "command not runnable".
func startFailureCode(sess execSession, startErr error) (int, bool) {
	if sess.ExitCode == 126 || sess.ExitCode == 127 {
		return sess.ExitCode, true
	}
	_, cause := status(startErr)
	switch {
	case hasCause(cause, "executable file not found", "no such file or directory"):
		return 127, true
	case hasCause(cause, "permission denied"):
		return 126, true
	}
	return 0, false
}

// attachExec starts the exec session attached and copies its multiplexed
// output into stdout and stderr until the process ends.
func attachExec(ctx context.Context, c *client, id string, stdout, stderr io.Writer) error {
	stream, err := c.execStart(ctx, id)
	if err != nil {
		return err
	}
	defer stream.Close()
	// An upgraded connection no longer follows the request's context:
	// closing it is what ends a read when the caller gives up.
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	defer stop()
	err = demux(stream, stdout, stderr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// demux splits Docker's multiplexed stream (8-byte headers: stream, 0, 0,
// 0, big-endian length) into stdout and stderr. Stream 3 carries an error
// from the service.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading the exec stream: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		var service bytes.Buffer
		switch hdr[0] {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			w = &service
		default:
			return fmt.Errorf("exec stream: unknown channel %d", hdr[0])
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return fmt.Errorf("reading the exec stream: %w", err)
		}
		if hdr[0] == 3 {
			return fmt.Errorf("exec stream: %s", bytes.TrimSpace(service.Bytes()))
		}
	}
}

// waitExec polls the exec session until its process is no longer running
// (the output can end a moment before the exit code is recorded).
func waitExec(ctx context.Context, c *client, id string) (execSession, error) {
	deadline := time.Now().Add(exitCodeTimeout)
	tick := time.NewTicker(exitCodePoll)
	defer tick.Stop()
	for {
		sess, err := c.execInspect(ctx, id)
		if err != nil {
			return execSession{}, err
		}
		if !sess.Running {
			return sess, nil
		}
		if time.Now().After(deadline) {
			return execSession{}, fmt.Errorf("exec session %s still running %s after its output ended", id, exitCodeTimeout)
		}
		select {
		case <-ctx.Done():
			return execSession{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// removeExec removes a finished exec session where the service has the
// endpoint (libpod API 4.8 and later). Best effort.
func (r *Runtime) removeExec(ctx context.Context, c *client, id string) {
	if !c.svc.canRemoveExec() {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adapterkit.CleanupTimeout)
	defer cancel()
	err := c.execRemove(cctx, id)
	if err != nil && !errors.Is(kindOf(runtime.OpExec, err), runtime.ErrNotFound) {
		r.opts.Logger.DebugContext(ctx, "podman: could not remove an exec session", "exec", id, "error", err)
	}
}
