package podman

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"go.podman.io/podman/v6/pkg/bindings"

	"github.com/roboco/sandboxer/runtime"
)

const (
	// exitCodeTimeout bounds the wait for an exec's exit code once its
	// output has ended.
	exitCodeTimeout = 10 * time.Second
	// exitCodePoll is how often that wait asks again.
	exitCodePoll = 10 * time.Millisecond
)

// execCreateConfig is the body of POST /containers/{name}/exec (the Docker
// ExecConfig fields that libpod reads).
type execCreateConfig struct {
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
	Tty          bool     `json:"Tty"`
	Cmd          []string `json:"Cmd"`
	Env          []string `json:"Env,omitempty"`
	User         string   `json:"User,omitempty"`
}

// execSession is the part of GET /exec/{id}/json the adapter reads.
type execSession struct {
	ExitCode int  `json:"ExitCode"`
	Running  bool `json:"Running"`
}

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
	conn, svc, err := r.connect(ctx, op, container)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	if len(spec.Cmd) == 0 {
		return runtime.ExecResult{}, runtime.NewError(Name, op, container, nil, errors.New("no command given"))
	}
	cfg := execCreateConfig{AttachStdout: true, AttachStderr: true, Cmd: spec.Cmd, User: spec.User}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		cfg.Env = append(cfg.Env, k+"="+spec.Env[k])
	}
	var created struct {
		ID string `json:"Id"`
	}
	err = call(ctx, conn, svc, request{method: http.MethodPost, path: "/containers/%s/exec", pathValues: []string{container}, body: cfg}, &created)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, container, err)
	}
	defer r.removeExec(ctx, conn, svc, created.ID)

	var stdout, stderr bytes.Buffer
	startErr := attachExec(ctx, conn, svc, created.ID, &stdout, &stderr)
	if startErr != nil && ctx.Err() != nil {
		return runtime.ExecResult{}, r.wrap(op, container, startErr)
	}
	sess, err := waitExec(ctx, conn, svc, created.ID)
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
func attachExec(ctx context.Context, conn *bindings.Connection, svc *service, id string, stdout, stderr io.Writer) error {
	resp, err := do(ctx, conn, svc, request{
		method:     http.MethodPost,
		path:       "/exec/%s/start",
		pathValues: []string{id},
		body:       map[string]bool{"Detach": false, "Tty": false},
		headers:    http.Header{"Connection": {"Upgrade"}, "Upgrade": {"tcp"}},
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		return resp.Process(nil)
	}
	// An upgraded connection no longer follows the request's context:
	// closing it is what ends a read when the caller gives up.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	err = demux(resp.Body, stdout, stderr)
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
func waitExec(ctx context.Context, conn *bindings.Connection, svc *service, id string) (execSession, error) {
	deadline := time.Now().Add(exitCodeTimeout)
	tick := time.NewTicker(exitCodePoll)
	defer tick.Stop()
	for {
		var sess execSession
		if err := call(ctx, conn, svc, request{method: http.MethodGet, path: "/exec/%s/json", pathValues: []string{id}}, &sess); err != nil {
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
func (r *Runtime) removeExec(ctx context.Context, conn *bindings.Connection, svc *service, id string) {
	if svc.major < 4 || (svc.major == 4 && svc.minor < 8) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := call(cctx, conn, svc, request{method: http.MethodPost, path: "/exec/%s/remove", pathValues: []string{id}, body: map[string]bool{"Force": true}}, nil)
	if err != nil && !errors.Is(kindOf(runtime.OpExec, err), runtime.ErrNotFound) {
		r.opts.log.DebugContext(ctx, "podman: could not remove an exec session", "exec", id, "error", err)
	}
}
