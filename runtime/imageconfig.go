package runtime

import (
	"path"
	"slices"
	"strings"
)

// ImageConfig is what an image's config declares about the containers made
// from it that a sandbox's layout depends on: where the image keeps its
// data. An engine reads it to mount its tmpfs where the image's own
// entrypoint looks (postgres:18 keeps PGDATA and its VOLUME elsewhere than
// postgres:17).
type ImageConfig struct {
	// Env is the config's environment, "KEY=value" entries in its order.
	Env []string
	// Volumes are the config's VOLUME paths, cleaned and sorted.
	Volumes []string
}

// NewImageConfig is an ImageConfig of env and the keys of volumes (an
// image config's Volumes map), each path cleaned and absolute, sorted and
// without duplicates: the form every adapter reports.
func NewImageConfig(env []string, volumes map[string]struct{}) ImageConfig {
	c := ImageConfig{Env: slices.Clone(env)}
	for v := range volumes {
		c.Volumes = append(c.Volumes, path.Clean("/"+v))
	}
	slices.Sort(c.Volumes)
	c.Volumes = slices.Compact(c.Volumes)
	return c
}

// Getenv is the value of key in Env (the last entry wins, as in a
// container's environment) and whether it is set.
func (c ImageConfig) Getenv(key string) (string, bool) {
	for _, kv := range slices.Backward(c.Env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
