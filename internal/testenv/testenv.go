// Package testenv is what sandboxer's tests share about their environment:
// the fixtures that `make env` writes to build/images.env, and the rule that
// a runtime listed in SANDBOXER_REQUIRE must answer (a missing runtime or
// image then fails the test instead of skipping it). Unavailable is where
// a missing runtime ends a test, and it says so in a marker line that
// hack/ci.sh reads.
package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// EnvRequire is the variable that lists the required runtimes, comma or
// space separated ("docker,podman"), or RequireAll. A test that a required
// runtime (or one of its fixtures) is missing for fails instead of
// skipping.
const EnvRequire = "SANDBOXER_REQUIRE"

// RequireAll in EnvRequire requires every runtime.
const RequireAll = "all"

// AnyRuntime is the runtime of a test that takes whichever runtime
// answers (auto-detection: sandboxtest). It is required when EnvRequire
// requires any runtime at all.
const AnyRuntime = "auto"

// Marker lines, printed on stdout by Unavailable, one line each:
//
//	SANDBOXER-SKIPPED runtime=<name> test=<test name>
//	SANDBOXER-REQUIRED-SKIPPED runtime=<name> test=<test name>
//
// The second one comes with the test's failure; hack/ci.sh fails the run
// on it, and counts the first one per runtime.
const (
	// MarkerSkipped starts the line of a test skipped for want of a
	// runtime that is not required.
	MarkerSkipped = "SANDBOXER-SKIPPED"
	// MarkerRequiredSkipped starts the line of a test that a required
	// runtime was missing for (the test fails).
	MarkerRequiredSkipped = "SANDBOXER-REQUIRED-SKIPPED"
)

// markers is where the marker lines go: the test binary's stdout, which
// `go test -v` copies into the log as it is, one line per write.
var markers io.Writer = os.Stdout

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

// Required reports whether EnvRequire requires runtime: it names it, or
// is RequireAll; AnyRuntime is required when EnvRequire is not empty. The
// variable is read from the process environment only (build/images.env
// never sets it), so that sandboxtest can ask from another module's tests.
func Required(runtime string) bool {
	names := strings.FieldsFunc(os.Getenv(EnvRequire), func(r rune) bool {
		return r == ',' || r == ' '
	})
	if runtime == AnyRuntime {
		return len(names) > 0
	}
	return slices.Contains(names, runtime) || slices.Contains(names, RequireAll)
}

// Unavailable ends a test that cannot run because the runtime (or a fixture
// it needs) is missing: a skip normally, a failure when the runtime is
// required. Either way it first prints a marker line (MarkerSkipped or
// MarkerRequiredSkipped) on stdout, so that a CI run can tell which
// runtimes its tests did not cover without reading their messages.
func Unavailable(t testing.TB, runtime, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(runtime) {
		fmt.Fprintf(markers, "%s runtime=%s test=%s\n", MarkerRequiredSkipped, runtime, t.Name())
		t.Fatalf("%s is required (%s) but unavailable: %s", runtime, EnvRequire, msg)
		return
	}
	fmt.Fprintf(markers, "%s runtime=%s test=%s\n", MarkerSkipped, runtime, t.Name())
	t.Skipf("%s unavailable: %s", runtime, msg)
}

// Image returns the ref of SANDBOXER_IMAGE_<NAME> (NAME upper-cased), or
// ends the test via Unavailable when it is not set.
func Image(t testing.TB, runtime, name string) string {
	t.Helper()
	return setting(t, runtime, "SANDBOXER_IMAGE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")), "run `make env`")
}

// setting returns the variable key, or ends the test via Unavailable
// (runtime) when it is not set; how tells how to set it.
func setting(t testing.TB, runtime, key, how string) string {
	t.Helper()
	v := Getenv(key)
	if v == "" {
		Unavailable(t, runtime, "%s is not set (%s)", key, how)
	}
	return v
}

// The podman-rootless row: the same adapter as the podman row, talking to
// an unprivileged user's own rootless service (hack/env/podman-rootless.sh
// makes that user and starts its service; build/images.env says where).
const (
	// PodmanRootless names the row: its tests are
	// <Test>/podman-rootless/..., and SANDBOXER_REQUIRE lists it as such.
	PodmanRootless = "podman-rootless"
	// EnvPodmanRootlessHost is the rootless service's endpoint,
	// "unix:///run/user/<uid>/podman/podman.sock".
	EnvPodmanRootlessHost = "SANDBOXER_PODMAN_ROOTLESS_HOST"
	// EnvPodmanRootlessUser is the unprivileged user whose service it is.
	EnvPodmanRootlessUser = "SANDBOXER_PODMAN_ROOTLESS_USER"
)

// PodmanRootlessHost returns EnvPodmanRootlessHost, or ends the test via
// Unavailable (runtime PodmanRootless) when it is not set.
func PodmanRootlessHost(t testing.TB) string {
	t.Helper()
	return setting(t, PodmanRootless, EnvPodmanRootlessHost, "run `make env`")
}

// The kubernetes row: the Kubernetes adapter's own tests, against the
// cluster `make env` brings up (build/images.env says where). It is not one
// of the integration suites' runtimes; SANDBOXER_REQUIRE lists it as
// Kubernetes for a missing cluster to fail its tests.
const (
	// Kubernetes names the row and the runtime.
	Kubernetes = "kubernetes"
	// EnvKubeconfig is the cluster's kubeconfig (an absolute path).
	EnvKubeconfig = "KUBECONFIG"
	// EnvK8sNamespace is the namespace the tests' pods go in.
	EnvK8sNamespace = "SANDBOXER_K8S_NAMESPACE"
)

// Kubeconfig returns EnvKubeconfig, or ends the test via Unavailable
// (runtime Kubernetes) when it is not set or names no file.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	path := setting(t, Kubernetes, EnvKubeconfig, "run `make env`, which brings up the test cluster")
	if path == "" {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, Kubernetes, "%s=%s: %v", EnvKubeconfig, path, err)
	}
	return path
}
