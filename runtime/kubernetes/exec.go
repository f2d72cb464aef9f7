package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// envPrelude is the argv that runs an exec with env: `sh -s` reads the
// script (the exports, then `exec "$@"`) from stdin, so that no value ever
// lands in argv, where the API server's audit log and the node's process
// list would show it; the command and its arguments are "$@".
var envPrelude = []string{"sh", "-s", "--"}

// Exec runs spec.Cmd in the pod's container through pods/exec (WebSocket,
// with SPDY as the fallback) and returns its exit code, stdout and stderr.
// spec.Env, when given, travels on the exec's stdin to `sh -s` (the image
// needs a POSIX shell then), never in argv. spec.User is
// runtime.ErrUnsupported: pods/exec runs as the container's user. An
// absent pod is runtime.ErrNotFound; a non-zero exit is a result.
func (r *Runtime) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	const op = runtime.OpExec
	if len(spec.Cmd) == 0 {
		return runtime.ExecResult{}, r.wrap(op, ref, errors.New("no command given"))
	}
	if spec.User != "" {
		return runtime.ExecResult{}, r.wrap(op, ref, unsupported("exec as user %q: pods/exec runs as the container's user", spec.User))
	}
	cmd, stdin, err := execArgv(spec)
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	p, err := r.getPod(ctx, op, ref)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	req := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: containerName,
			Command:   cmd,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	exe, err := r.executor(req.URL())
	if err != nil {
		return runtime.ExecResult{}, r.wrap(op, ref, err)
	}
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
	if stdin != nil {
		opts.Stdin = stdin
	}
	err = exe.StreamWithContext(ctx, opts)
	var ee utilexec.ExitError
	switch {
	case err == nil:
		return runtime.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
	case errors.As(err, &ee) && ee.Exited():
		return runtime.ExecResult{ExitCode: ee.ExitStatus(), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
	}
	return runtime.ExecResult{}, r.wrap(op, ref, fmt.Errorf("exec %q: %w", spec.Cmd[0], err))
}

// executor streams an exec over WebSocket, or SPDY where the API server
// refuses the upgrade.
func (r *Runtime) executor(u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(r.execConfig(), "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.execConfig(), "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// execConfig is the client's config without the request timeout: an exec
// lasts as long as its command, bounded by the caller's context.
func (r *Runtime) execConfig() *rest.Config {
	c := *r.config
	c.Timeout = 0
	return &c
}

// execArgv is the argv of spec and, when it has env, the stdin that
// carries it (see envPrelude).
func execArgv(spec runtime.ExecSpec) ([]string, io.Reader, error) {
	if len(spec.Env) == 0 {
		return spec.Cmd, nil, nil
	}
	var b strings.Builder
	for _, k := range keys(spec.Env) {
		if !envNameRE.MatchString(k) {
			return nil, nil, adapterkit.WithKind(runtime.ErrInvalid, "%w: env name %q is not a shell identifier", runtime.ErrInvalid, k)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(spec.Env[k]))
	}
	b.WriteString("exec \"$@\"\n")
	return slices.Concat(envPrelude, spec.Cmd), strings.NewReader(b.String()), nil
}

// shellQuote quotes s for sh: in single quotes, each ' written '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
