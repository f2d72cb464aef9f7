package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// CLILines runs a runtime's own CLI (docker, podman, ctr), which tests
// use to see the runtime as a user does rather than through the adapter,
// and returns its stdout's non-empty lines. A failure names the command
// and carries its stderr.
func CLILines(ctx context.Context, argv ...string) ([]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	var lines []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
