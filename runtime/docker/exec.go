package docker

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Exec runs spec.Cmd inside a running container, waits for it and returns
// its exit code with stdout and stderr separated (the daemon multiplexes
// them on one stream). An absent container is runtime.ErrNotFound; a
// non-zero exit code is a result, not an error.
func (r *Runtime) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	if err := r.negotiate(ctx, runtime.OpExec, ref); err != nil {
		return runtime.ExecResult{}, err
	}
	if len(spec.Cmd) == 0 {
		return runtime.ExecResult{}, r.wrap(runtime.OpExec, ref, adapterkit.WithKind(nil, "no command given"))
	}
	created, err := r.cli.ContainerExecCreate(ctx, ref, container.ExecOptions{
		Cmd:          spec.Cmd,
		Env:          adapterkit.EnvList(spec.Env),
		User:         spec.User,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return runtime.ExecResult{}, r.wrap(runtime.OpExec, ref, err)
	}
	att, err := r.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return runtime.ExecResult{}, r.wrap(runtime.OpExec, ref, err)
	}
	defer att.Close()
	// The hijacked connection does not watch ctx: close it when ctx ends so
	// that the copy below returns.
	stop := context.AfterFunc(ctx, func() { att.Close() })
	defer stop()

	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return runtime.ExecResult{}, r.wrap(runtime.OpExec, ref, fmt.Errorf("reading output of %q: %w", spec.Cmd[0], err))
	}
	code, err := r.execExitCode(ctx, created.ID)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(runtime.OpExec, ref, err)
	}
	return runtime.ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// execExitCode waits for the exec to be reported finished: the output
// stream can end a moment before the daemon records the exit code.
func (r *Runtime) execExitCode(ctx context.Context, execID string) (int, error) {
	delay := 5 * time.Millisecond
	for {
		ins, err := r.cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return 0, err
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
