package faults

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The CLI is built once per test binary, from ./cmd/sandboxer.
var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
	cliDir  string
)

// TestMain removes the CLI build directory after every test ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliDir != "" {
		_ = os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// cli returns the path of the sandboxer binary, built from this checkout.
func cli(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		cliDir, cliErr = os.MkdirTemp("", "sbxfaults-cli")
		if cliErr != nil {
			return
		}
		cliPath = filepath.Join(cliDir, "sandboxer")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", cliPath, "github.com/roboco/sandboxer/cmd/sandboxer").CombinedOutput()
		if err != nil {
			cliErr = errors.New("go build ./cmd/sandboxer: " + err.Error() + "\n" + string(out))
		}
	})
	require.NoError(t, cliErr)
	return cliPath
}

// cliResult is one finished CLI invocation.
type cliResult struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// runCLI runs the CLI with args and env added to this process's
// environment, and waits for it.
func runCLI(ctx context.Context, t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, cli(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		require.NoError(t, err, "run sandboxer %v", args)
	}
	return res
}
