package detect

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// ModulePath is the import path prefix of sandboxer's packages: a
// runtime's adapter is ModulePath + "/runtime/" + its name.
const ModulePath = "github.com/roboco/sandboxer"

// AllImport is the package that links every adapter.
const AllImport = ModulePath + "/runtime/all"

// ErrNotLinked: detection found a runtime (its socket exists, its endpoint
// is configured, or it was named explicitly) whose adapter this program
// does not link. The message names the import to add.
var ErrNotLinked = errors.New("adapter not linked")

// ConnectOptions are what detection hands a Driver besides the candidate.
type ConnectOptions struct {
	// Logger is never nil.
	Logger *slog.Logger
	// UnenforcedLimits is Options.UnenforcedLimits: an adapter that cannot
	// enforce limits may run without them, with a warning, instead of
	// refusing; the others ignore it.
	UnenforcedLimits bool
	// PingTimeout is Options.PingTimeout: the adapter's own bound on its
	// first contact (WithPingTimeout) is the one detection waits for, so
	// that a slow service is not cut short by an adapter's default.
	PingTimeout time.Duration
}

// Driver makes the runtime for a candidate of its runtime without
// contacting it (Detect pings it): what an adapter registers.
type Driver func(Candidate, ConnectOptions) (runtime.ContainerRuntime, error)

var drivers = struct {
	mu sync.RWMutex
	m  map[string]Driver
}{m: map[string]Driver{}}

// Register makes the adapter of the runtime called name available to
// detection, as database/sql.Register does a driver: each adapter calls it
// from its init, so that a program links, and detection reaches, exactly
// the adapters it imports. It panics when name is not one of Choosable or
// is registered twice (a programming error, as in database/sql).
func Register(name string, d Driver) {
	if !slices.Contains(Choosable(), name) {
		panic(fmt.Sprintf("detect: Register of unknown runtime %q (want one of %v)", name, Choosable()))
	}
	if d == nil {
		panic("detect: Register of runtime " + name + " with a nil driver")
	}
	drivers.mu.Lock()
	defer drivers.mu.Unlock()
	if _, dup := drivers.m[name]; dup {
		panic("detect: Register called twice for runtime " + name)
	}
	drivers.m[name] = d
}

// Linked lists the runtimes whose adapter this program links, in the order
// of Choosable.
func Linked() []string {
	drivers.mu.RLock()
	defer drivers.mu.RUnlock()
	var out []string
	for _, name := range Choosable() {
		if drivers.m[name] != nil {
			out = append(out, name)
		}
	}
	return out
}

func driver(name string) Driver {
	drivers.mu.RLock()
	defer drivers.mu.RUnlock()
	return drivers.m[name]
}

// Import is the import path of the adapter of the runtime called name.
func Import(name string) string { return ModulePath + "/runtime/" + name }

// notLinkedError says that the adapter of runtime is not linked, and which
// import links it.
func notLinkedError(name string) error {
	return fmt.Errorf("detect: %s: %w into this program: add import _ %q (or _ %q for every runtime)", name, ErrNotLinked, Import(name), AllImport)
}

// Connect makes the adapter for c without contacting it, with the driver
// its adapter registered. A runtime whose adapter is not linked is an
// error matching ErrNotLinked that names the import to add.
func Connect(c Candidate, logger *slog.Logger) (runtime.ContainerRuntime, error) {
	return connect(c, ConnectOptions{Logger: logger})
}

func connect(c Candidate, o ConnectOptions) (runtime.ContainerRuntime, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if !slices.Contains(Choosable(), c.Runtime) {
		return nil, fmt.Errorf("detect: connect %q: %w", c.Runtime, ErrUnknownRuntime)
	}
	d := driver(c.Runtime)
	if d == nil {
		return nil, notLinkedError(c.Runtime)
	}
	return d(c, o)
}
