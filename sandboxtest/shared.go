package sandboxtest

import (
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// sharedMemoryBytes is a shared sandbox's memory limit when Options sets
// none: it holds every test's database at once, on tmpfs, which counts
// against the container's memory (an empty postgres database is about
// 8 MB, and a hundred parallel tests hold a hundred of them, plus the
// pools of pre-cloned ones, in the engine's data budget for this limit:
// about 1.5 GiB of postgres tablespace at 4 GiB). A full shared sandbox
// answers a clone with "No space left on device".
const sharedMemoryBytes = 4 << 30

// server is the shared sandbox of one engine for one set of Options: one
// container for every test binary of a run (run.go), or with
// Options.PerBinary for this test binary alone, started by the first test
// that asks for a database of that engine, torn down by Main (or, when the
// binary did not run through Main or was killed, by a janitor sweep once
// this process is gone, or every process of the run: the sandbox carries
// their owner labels).
type server struct {
	key    sharedKey
	engine string
	kit    enginetest.Kit
	opts   Options
	once   sync.Once
	st     *started
	err    error
	// url is the server's connection URL, credentials included, at its
	// default database.
	url string
	ep  engines.Endpoint
	// alloc hands out the engine's databases.
	alloc enginetest.Allocator
	// kept is set once a database was kept for a failed test: Main then
	// leaves the sandbox running.
	kept atomic.Bool
	// part is this process's part in the run whose sandbox this is (nil
	// with Options.PerBinary).
	part *lifetime.Participant
}

// sharedKey tells shared sandboxes apart: the same engine under different
// Options (where detection looks, prefixes, images, limits) gets its own.
type sharedKey struct {
	engine, labelPrefix, envPrefix, images string
	// runtime is where detection looks for a runtime: the runtime asked
	// for, and each candidate's runtime, endpoint and namespace as
	// detection resolves them from Options.Detect and the environment,
	// so that Options that reach different daemons (rootful and rootless
	// Podman, two containerd namespaces, another DOCKER_HOST) never share
	// a server.
	runtime    string
	unenforced bool
	memory     int64
	cpus       float64
	perBinary  bool
}

var shared struct {
	mu      sync.Mutex
	servers map[sharedKey]*server
}

func keyOf(engine string, o Options) sharedKey {
	var images []string
	for _, k := range slices.Sorted(maps.Keys(o.Images)) {
		images = append(images, k+"="+o.Images[k])
	}
	return sharedKey{
		engine: engine, labelPrefix: o.LabelPrefix, envPrefix: o.EnvPrefix,
		images: strings.Join(images, ","), runtime: detectionKey(o.Detect),
		unenforced: o.Detect.UnenforcedLimits, memory: o.MemoryBytes, cpus: o.CPUs,
		perBinary: o.PerBinary,
	}
}

// detectionKey says where detection under opts looks: the runtime asked
// for and the candidates it would try, in order; or why it cannot (a
// start then fails with that error).
func detectionKey(opts detect.Options) string {
	name, _, err := detect.Choice(opts)
	if err != nil {
		return "error: " + err.Error()
	}
	cands, err := detect.Candidates(opts)
	if err != nil {
		return "error: " + err.Error()
	}
	parts := []string{name}
	for _, c := range cands {
		parts = append(parts, c.Runtime+" "+c.Endpoint+" "+c.Namespace)
	}
	return strings.Join(parts, "\n")
}

// sharedServer returns the running shared sandbox of engine (whose test
// kit is kit) under opts, starting it on first use. A failed start is the
// answer for every later caller too.
func sharedServer(engine string, kit enginetest.Kit, opts Options) (*server, error) {
	shared.mu.Lock()
	if shared.servers == nil {
		shared.servers = map[sharedKey]*server{}
	}
	k := keyOf(engine, opts)
	s, ok := shared.servers[k]
	if !ok {
		s = &server{engine: engine, kit: kit, opts: opts, key: k}
		shared.servers[k] = s
	}
	shared.mu.Unlock()
	s.once.Do(s.start)
	return s, s.err
}

func (s *server) start() {
	opts := s.opts
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = sharedMemoryBytes
	}
	if opts.CPUs == 0 {
		// Every parallel test's work lands on this one server.
		opts.CPUs = float64(goruntime.NumCPU())
	}
	if !opts.PerBinary {
		path, err := runPath(s.key)
		if err == nil {
			// Not Linux: no run owner a janitor could judge.
			_, err = lifetime.CurrentProcess()
		}
		if err == nil {
			s.err = s.joinRun(opts, path)
			return
		}
		slog.Warn("sandboxtest: a shared sandbox of this test binary's own", "err", err)
	}
	st, err := start(opts, "shared-"+ids.Hex(5), "shared", map[string][]string{s.engine: s.kit.SharedArgs()}, []string{s.engine})
	if err != nil {
		s.err = err
		return
	}
	if err := s.use(st); err != nil {
		s.err = err
		_ = st.teardown()
	}
}

// use makes st the server's sandbox, with an allocator on it.
func (s *server) use(st *started) error {
	e, _ := engines.Default.Lookup(s.engine)
	v, _ := engines.URLVar(e.Env(st.envPrefix, engines.Endpoint{}, engines.Credentials{}))
	url, _ := st.sb.Lookup(v.Name)
	alloc, err := s.kit.NewAllocator(url)
	if err != nil {
		return fmt.Errorf("shared %s sandbox %s: %w", s.engine, st.sb.Containers[0].Name, err)
	}
	s.st, s.url, s.ep, s.alloc = st, url, st.sb.Containers[0].Endpoint, alloc
	return nil
}

// env is the engine's emitted env for the database name at rawURL: the
// engine's own variables (<P>_DB_* for postgres), for that database.
func (s *server) env(name, rawURL string) ([]engines.EnvVar, error) {
	e, _ := engines.Default.Lookup(s.engine)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: bad URL: %w", s.engine, err)
	}
	cred := engines.Credentials{User: u.User.Username(), Database: name}
	cred.Password, _ = u.User.Password()
	env := e.Env(s.st.envPrefix, s.ep, cred)
	v, _ := engines.URLVar(env)
	for i := range env {
		if env[i].Name == v.Name {
			env[i].Value = rawURL
		}
	}
	return env, nil
}

// Main runs the test binary's tests and then leaves or tears down the
// shared sandboxes the per-test databases (NewDB) live on, for a
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }
//
// Without it the shared sandboxes outlive the binary until a janitor
// sweep (`sandboxer gc`) removes them: their owner, the test process or
// every test binary of the run, is then gone. A shared sandbox holding a
// database kept for a failed test (DBOptions.KeepOnFailure) is left
// running, and said so on stderr.
func Main(m *testing.M) int {
	code := m.Run()
	if err := Close(); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Close ends this process's use of every shared sandbox (Main calls it
// after the tests): one this test binary has to itself
// (Options.PerBinary) is torn down; one of a run is left to the other
// test binaries that use it, and torn down by the last one out. Later
// per-test databases start or join one again.
func Close() error {
	shared.mu.Lock()
	servers := shared.servers
	shared.servers = nil
	shared.mu.Unlock()
	var errs []string
	for _, s := range servers {
		if s.st == nil {
			continue
		}
		name := s.st.sb.Containers[0].Name
		if s.part != nil {
			if err := s.leaveRun(); err != nil {
				errs = append(errs, fmt.Sprintf("leave %s: %v", name, err))
			}
			continue
		}
		s.alloc.Close()
		if s.kept.Load() {
			fmt.Fprintf(os.Stderr, "sandboxtest: %s stays, with the databases kept for failed tests; `sandboxer gc` removes it now that this process is gone\n", name)
			s.st.rt.Close()
			continue
		}
		if err := s.st.teardown(); err != nil {
			errs = append(errs, fmt.Sprintf("teardown of %s: %v", name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
