package standins

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestImageConfig checks each stand-in's image config against the parts of
// the official image's config that callers rely on (volumes become tmpfs
// paths, exposed ports get published, the stop signal drives a graceful
// stop). Getting the image also proves the pull from the loopback registry.
func TestImageConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		entrypoint []string
		cmd        []string
		ports      []string
		volumes    []string
		stopSignal string
		workingDir string
		env        []string
	}{
		{name: "busybox", cmd: []string{"sh"}},
		{name: "busybox-volume", cmd: []string{"sh"}, volumes: []string{"/data"}},
		{
			name:       "postgres",
			entrypoint: []string{"docker-entrypoint.sh"},
			cmd:        []string{"postgres"},
			ports:      []string{"5432/tcp"},
			volumes:    []string{"/var/lib/postgresql/data"},
			stopSignal: "SIGINT",
			env:        []string{"PGDATA=/var/lib/postgresql/data", "PG_MAJOR=16"},
		},
		{
			name:       "postgres18",
			entrypoint: []string{"docker-entrypoint.sh"},
			cmd:        []string{"postgres"},
			ports:      []string{"5432/tcp"},
			volumes:    []string{"/var/lib/postgresql"},
			stopSignal: "SIGINT",
			env:        []string{"PGDATA=/var/lib/postgresql/18/docker", "PG_MAJOR=18"},
		},
		{
			name:       "redis",
			entrypoint: []string{"docker-entrypoint.sh"},
			cmd:        []string{"redis-server"},
			ports:      []string{"6379/tcp"},
			volumes:    []string{"/data"},
			workingDir: "/data",
		},
		{
			name:       "mariadb",
			entrypoint: []string{"docker-entrypoint.sh"},
			cmd:        []string{"mariadbd"},
			ports:      []string{"3306/tcp"},
			volumes:    []string{"/var/lib/mysql"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			img := inspectImage(t, standinImage(t, tt.name))
			assert.Equal(t, "linux", img.Os)
			assert.Equal(t, "amd64", img.Architecture)
			assert.Equal(t, tt.entrypoint, img.Config.Entrypoint, "Entrypoint")
			assert.Equal(t, tt.cmd, img.Config.Cmd, "Cmd")
			assert.ElementsMatch(t, tt.ports, keys(img.Config.ExposedPorts), "ExposedPorts")
			assert.ElementsMatch(t, tt.volumes, keys(img.Config.Volumes), "Volumes")
			assert.Equal(t, tt.stopSignal, img.Config.StopSignal, "StopSignal")
			assert.Equal(t, tt.workingDir, img.Config.WorkingDir, "WorkingDir")
			assert.Empty(t, img.Config.User, "User: the entrypoint drops privileges itself, as the official image does")
			for _, e := range tt.env {
				assert.Contains(t, img.Config.Env, e)
			}
		})
	}
}

func keys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
