package engines

import (
	"fmt"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// ExitZero passes when the command exited with status 0.
func ExitZero(res runtime.ExecResult) error {
	if res.ExitCode != 0 {
		return fmt.Errorf("exit status %d", res.ExitCode)
	}
	return nil
}

// StdoutIs returns a check that passes when the command exited with status 0
// and the last non-empty line of its stdout is want.
func StdoutIs(want string) func(runtime.ExecResult) error {
	return func(res runtime.ExecResult) error {
		if err := ExitZero(res); err != nil {
			return err
		}
		if got := lastLine(string(res.Stdout)); got != want {
			return fmt.Errorf("answered %q, want %q", got, want)
		}
		return nil
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
