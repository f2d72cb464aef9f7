// Package testenv is what sandboxer's tests share about their environment:
// the fixtures that `make env` writes to build/images.env, and the rule that
// a runtime listed in SANDBOXER_REQUIRE must answer (a missing runtime or
// image then fails the test instead of skipping it).
package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var loadOnce sync.Once

// Load reads build/images.env from the module root (if present) into the
// process environment, without overriding variables that are already set.
// It is safe to call many times; only the first call reads the file.
func Load() {
	loadOnce.Do(func() {
		root, ok := moduleRoot()
		if !ok {
			return
		}
		f, err := os.Open(filepath.Join(root, "build", "images.env"))
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			line = strings.TrimPrefix(line, "export ")
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			v = strings.Trim(v, `"'`)
			if _, set := os.LookupEnv(k); !set {
				os.Setenv(k, v)
			}
		}
	})
}

func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Getenv returns an environment variable after Load.
func Getenv(key string) string {
	Load()
	return os.Getenv(key)
}

// Required reports whether SANDBOXER_REQUIRE (comma or space separated)
// names the runtime, or is "all".
func Required(runtime string) bool {
	for _, f := range strings.FieldsFunc(Getenv("SANDBOXER_REQUIRE"), func(r rune) bool {
		return r == ',' || r == ' '
	}) {
		if f == runtime || f == "all" {
			return true
		}
	}
	return false
}

// Unavailable ends a test that cannot run because the runtime (or a fixture
// it needs) is missing: a skip normally, a failure when the runtime is
// required.
func Unavailable(t testing.TB, runtime, format string, args ...any) {
	t.Helper()
	if Required(runtime) {
		t.Fatalf("%s is required (SANDBOXER_REQUIRE) but unavailable: "+format, append([]any{runtime}, args...)...)
	}
	t.Skipf("%s unavailable: "+format, append([]any{runtime}, args...)...)
}

// Image returns the ref of SANDBOXER_IMAGE_<NAME> (NAME upper-cased), or
// ends the test via Unavailable when it is not set.
func Image(t testing.TB, runtime, name string) string {
	t.Helper()
	key := "SANDBOXER_IMAGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	ref := Getenv(key)
	if ref == "" {
		Unavailable(t, runtime, "%s is not set (run `make env`)", key)
	}
	return ref
}
