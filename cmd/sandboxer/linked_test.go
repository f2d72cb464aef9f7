package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/runtime/detect"
)

// TestProgramsLinkTheirAdapters reads, with the go tool, which adapters
// and engines a program links (not this test binary, which links every
// one through internal/testruntimes): the CLI links every adapter and
// every engine, so each runtime detection may find is one it can use and
// each service is one it can serve; a consumer of sandboxtest that uses
// PostgresDB or Postgres only links Docker's and Podman's adapters and
// the postgres engine, and none of the clients it does not use: not
// go-redis, mongo-driver, containerd's client or client-go (bench/adopt
// measures what that saves).
func TestProgramsLinkTheirAdapters(t *testing.T) {
	assert.Equal(t, detect.Choosable(), detect.Linked(), "this test binary")
	tests := []struct {
		pkg     string
		want    []string
		engines []string
		// never are the import path prefixes of clients it must not link.
		never []string
	}{
		{"github.com/roboco/sandboxer/cmd/sandboxer", detect.Choosable(), engines.Default.Names(), nil},
		{"github.com/roboco/sandboxer/sandboxtest", []string{detect.Docker, detect.Podman}, []string{postgres.Engine{}.Spec().Name},
			[]string{"github.com/redis/go-redis/", "go.mongodb.org/mongo-driver/", "github.com/go-sql-driver/mysql", "github.com/containerd/containerd/", "k8s.io/client-go/"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg[strings.LastIndex(tt.pkg, "/")+1:], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "go", "list", "-deps", tt.pkg).Output()
			require.NoError(t, err)
			deps := strings.Fields(string(out))
			var linked []string
			for _, name := range detect.Choosable() {
				if slices.Contains(deps, detect.Import(name)) {
					linked = append(linked, name)
				}
			}
			assert.Equal(t, tt.want, linked)
			if !slices.Contains(tt.want, detect.Kubernetes) {
				assert.False(t, slices.ContainsFunc(deps, func(p string) bool { return strings.HasPrefix(p, "k8s.io/client-go/") }), "client-go linked")
			}
			var linkedEngines []string
			for _, name := range engines.Default.Names() {
				if slices.Contains(deps, engines.Import(name)) {
					linkedEngines = append(linkedEngines, name)
				}
			}
			assert.Equal(t, tt.engines, linkedEngines, "engines linked")
			for _, prefix := range tt.never {
				i := slices.IndexFunc(deps, func(p string) bool { return strings.HasPrefix(p, prefix) })
				if !assert.Negative(t, i, "%s* linked", prefix) {
					t.Logf("first: %s", deps[i])
				}
			}
		})
	}
}

// TestCoreLinksNoEngineNorAdapter: the engine contract, the provisioner
// and the janitor are written against the port and the registry: they
// link no engine's package (so no database client) and no adapter, and a
// program chooses both by what it imports.
func TestCoreLinksNoEngineNorAdapter(t *testing.T) {
	for _, pkg := range []string{"engines", "provision", "janitor"} {
		t.Run(pkg, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "go", "list", "-deps", "github.com/roboco/sandboxer/"+pkg).Output()
			require.NoError(t, err)
			deps := strings.Fields(string(out))
			for _, name := range engines.Default.Names() {
				assert.NotContains(t, deps, engines.Import(name), "engine linked")
			}
			for _, name := range detect.Choosable() {
				assert.NotContains(t, deps, detect.Import(name), "adapter linked")
			}
		})
	}
}
