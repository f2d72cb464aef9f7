package containerd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Exec runs spec.Cmd in the running task (task.Exec) of the container ref
// names (an ID or a name, see getContainer), with the container's
// environment plus spec.Env, as spec.User when given (a name or uid[:gid],
// resolved in the container's /etc/passwd), and waits for it: stdout,
// stderr and the exit code come back separately.
func (r *Runtime) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	const op = runtime.OpExec
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return runtime.ExecResult{}, err
	}
	if len(spec.Cmd) == 0 {
		return runtime.ExecResult{}, r.wrap(op, ref, adapterkit.WithKind(nil, "no command given"))
	}
	info, err := r.getContainer(ctx, op, ref)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	c, err := r.client.LoadContainer(ctx, info.ID)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	task, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return runtime.ExecResult{}, r.wrap(op, ref, adapterkit.WithKind(nil, "container is not running (created, never started)"))
	}
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	if st, err := task.Status(ctx); err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	} else if st.Status != client.Running {
		return runtime.ExecResult{}, r.wrap(op, ref, adapterkit.WithKind(nil, "container is not running (%s)", st.Status))
	}
	pspec, err := r.execProcess(ctx, c, spec)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}

	fifoDir := filepath.Join(r.stateDir, "fifo")
	if err := os.MkdirAll(fifoDir, 0o700); err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	var stdout, stderr bytes.Buffer
	p, err := task.Exec(ctx, execID(), pspec,
		cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr), cio.WithFIFODir(fifoDir)))
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, fmt.Errorf("exec %q: %w", spec.Cmd, err))
	}
	defer func() {
		if _, err := p.Delete(context.WithoutCancel(ctx), client.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			r.log.Warn("containerd: delete exec process", "container", ref, "error", err)
		}
	}()
	exited, err := p.Wait(ctx)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	if err := p.Start(ctx); err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, fmt.Errorf("start %q: %w", spec.Cmd, err))
	}
	var status client.ExitStatus
	select {
	case status = <-exited:
	case <-ctx.Done():
		return runtime.ExecResult{}, r.wrap(op, ref, ctx.Err())
	}
	code, _, err := status.Result()
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	// The streams are complete once their copiers saw EOF.
	p.IO().Wait()
	return runtime.ExecResult{ExitCode: int(code), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// execProcess is the exec's process spec: the container's process with
// spec's argv, env added and user.
func (r *Runtime) execProcess(ctx context.Context, c client.Container, spec runtime.ExecSpec) (*specs.Process, error) {
	s, err := c.Spec(ctx)
	if err != nil {
		return nil, err
	}
	if s.Process == nil {
		return nil, fmt.Errorf("the container's spec has no process")
	}
	p := *s.Process
	p.Terminal = false
	p.ConsoleSize = nil
	p.Args = spec.Cmd
	p.Env = mergeEnv(s.Process.Env, spec.Env)
	if spec.User != "" {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		s.Process = &p
		if err := oci.WithUser(spec.User)(ctx, r.client, &info, s); err != nil {
			return nil, fmt.Errorf("user %q: %w", spec.User, err)
		}
	}
	return &p, nil
}

// mergeEnv adds env to base (KEY=value lines), replacing keys it has.
func mergeEnv(base []string, env map[string]string) []string {
	out := make([]string, 0, len(base)+len(env))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := env[k]; !replaced {
			out = append(out, kv)
		}
	}
	return append(out, adapterkit.EnvList(env)...)
}

// execID names one exec process.
func execID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}
