package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

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
			code, errb := upWithoutRuntime(tt.env, tt.args, func(o detect.Options) { got = append(got, o.UnenforcedLimits) })
			assert.Equal(t, ExitUnavailable, code, errb.String())
			assert.NotEmpty(t, got, "detection ran")
			for _, g := range got {
				assert.Equal(t, tt.want, g)
			}
		})
	}
}

// TestPingTimeout: --ping-timeout, or SANDBOXER_PING_TIMEOUT, is how long
// detection gives each candidate's ping (zero: detection's default); a
// negative or unreadable value is a usage error before any runtime is
// contacted.
func TestPingTimeout(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		want     time.Duration
		wantCode int
	}{
		{name: "Default", want: 0, wantCode: ExitUnavailable},
		{name: "Flag", args: []string{"--ping-timeout", "15s"}, want: 15 * time.Second, wantCode: ExitUnavailable},
		{name: "Env", env: map[string]string{envPingTimeout: "20s"}, want: 20 * time.Second, wantCode: ExitUnavailable},
		{name: "FlagBeatsEnv", env: map[string]string{envPingTimeout: "20s"}, args: []string{"--ping-timeout", "5s"}, want: 5 * time.Second, wantCode: ExitUnavailable},
		{name: "NegativeFlag", args: []string{"--ping-timeout", "-1s"}, wantCode: ExitUsage},
		{name: "BadEnv", env: map[string]string{envPingTimeout: "soon"}, wantCode: ExitUsage},
		{name: "NegativeEnv", env: map[string]string{envPingTimeout: "-3s"}, wantCode: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			code, errb := upWithoutRuntime(tt.env, tt.args, func(o detect.Options) { got = append(got, o.PingTimeout) })
			assert.Equal(t, tt.wantCode, code, errb.String())
			if tt.wantCode == ExitUsage {
				assert.Empty(t, got, "no runtime was contacted")
				assert.Contains(t, strings.ToLower(strings.ReplaceAll(errb.String(), "_", "-")), "ping-timeout", "the error names the setting")
				return
			}
			assert.NotEmpty(t, got, "detection ran")
			for _, g := range got {
				assert.Equal(t, tt.want, g)
			}
		})
	}
}

// upWithoutRuntime runs `sandboxer ARGS up --owner 1 -s redis` in process
// with env as its whole environment and no runtime to find: seen is given
// the detection options of every attempt. It returns the exit code and
// stderr.
func upWithoutRuntime(env map[string]string, args []string, seen func(detect.Options)) (int, *bytes.Buffer) {
	var out, errb bytes.Buffer
	a := &app{
		io:       Stdio{In: strings.NewReader(""), Out: &out, Err: &errb},
		getenv:   hermetic(env),
		registry: engines.Default,
		detectHook: func(o *detect.Options) {
			seen(*o)
			o.SocketExists = func(string) bool { return false }
			o.Connect = func(detect.Candidate, *slog.Logger) (runtime.ContainerRuntime, error) {
				return nil, errors.New("no runtime in this test")
			}
		},
	}
	return a.main(context.Background(), append(args, "up", "--owner", "1", "-s", "redis")), &errb
}
