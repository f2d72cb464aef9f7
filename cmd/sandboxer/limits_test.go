package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// TestUnenforcedLimitsOptOut: --unenforced-limits, or
// SANDBOXER_UNENFORCED_LIMITS, is what reaches runtime detection as
// detect.Options.UnenforcedLimits (which hands it to the podman adapter);
// without either, limits are enforced or refused.
func TestUnenforcedLimitsOptOut(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want bool
	}{
		{name: "Default", want: false},
		{name: "Flag", args: []string{"--unenforced-limits"}, want: true},
		{name: "Env", env: map[string]string{envUnenforcedLimits: "1"}, want: true},
		{name: "EnvOff", env: map[string]string{envUnenforcedLimits: "false"}, want: false},
		{name: "FlagBeatsEnvOff", env: map[string]string{envUnenforcedLimits: "0"}, args: []string{"--unenforced-limits"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []bool
			var out, errb bytes.Buffer
			a := &app{
				io:       Stdio{In: strings.NewReader(""), Out: &out, Err: &errb},
				getenv:   hermetic(tt.env),
				registry: engines.Default,
				detectHook: func(o *detect.Options) {
					got = append(got, o.UnenforcedLimits)
					o.SocketExists = func(string) bool { return false }
					o.Connect = func(detect.Candidate, *slog.Logger) (runtime.ContainerRuntime, error) {
						return nil, errors.New("no runtime in this test")
					}
				},
			}
			code := a.main(context.Background(), append(tt.args, "up", "--owner", "1", "-s", "redis"))
			assert.Equal(t, ExitUnavailable, code, errb.String())
			assert.NotEmpty(t, got, "detection ran")
			for _, g := range got {
				assert.Equal(t, tt.want, g)
			}
		})
	}
}
