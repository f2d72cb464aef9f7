// Package enginetest is the contract of an engine's test kit: what the
// tests and the bench need of an engine beyond what production does (fill
// its server until it answers "full", hand out a database per test on a
// shared server), kept out of the engines' production packages. Each
// engine's kit lives beside it (engines/postgres/postgrestest, …) and
// registers itself for its engine when imported; KitOf finds it through
// the engine, so no list of engine names is kept here.
package enginetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/roboco/sandboxer/engines"
)

// Kit is an engine's test kit.
type Kit interface {
	// Engine is the engine the kit is for.
	Engine() engines.Engine
	Filler
	// SharedArgs are the server arguments a shared sandbox of the engine
	// needs beyond the engine's own, to serve a database or more per
	// parallel test (postgres: connections; redis: logical databases).
	SharedArgs() []string
	// NewAllocator hands out the databases of the shared server at rawURL
	// (its emitted URL), which runs with SharedArgs.
	NewAllocator(rawURL string) (Allocator, error)
	// CLILogin is a POSIX shell line that logs in at the URL in $URL (the
	// URL the engine emits) with the engine's own command-line client, as
	// the engine's image ships it, runs a cheap query and exits with its
	// client's status; want is what it then prints. It is how the suites
	// prove a sandbox is reached from another container or pod (an
	// agent) the way a consumer there would, without a Go client.
	CLILogin() (script, want string)
}

// Allocator is one engine's hand-out of per-test databases on a shared
// server. Several allocators, in several processes (the test binaries of
// one `go test ./...`), may hand out databases of one server at once:
// what one hands out, no other does.
type Allocator interface {
	// Acquire hands out a database of its own, as its name (redis: the
	// logical database's number) and its URL.
	Acquire(ctx context.Context, req Request) (name, url string, err error)
	// Release empties the database for the next test (redis) or drops it.
	Release(ctx context.Context, name string) error
	// Tidy stops background work and returns to the server what the
	// allocator made and did not hand out (postgres: the clones made
	// ahead, the drops not yet done), for a server that outlives the
	// allocator: one that other processes share. Close follows.
	Tidy(ctx context.Context) error
	// Close stops background work and closes connections.
	Close()
}

// Request is what a test asks of its database. Only an engine whose
// databases are copies of a template (postgres) reads it; the others
// hand out an empty database whatever it says.
type Request struct {
	// Template tells templates apart: requests with the same Template
	// share one (Key makes one from what a template is built of).
	Template string
	// Migrate builds the template against its URL, once per Template (nil:
	// an empty template).
	Migrate func(ctx context.Context, url string) error
	// Pool is how many databases are made ahead per template (0: the
	// kit's default; negative: none, each test waits for its own).
	Pool int
	// Strategy is how a database is copied, in the kit's terms ("": the
	// kit's default).
	Strategy string
}

// Key is a hex sha256 of parts, each length-prefixed: the identity of a
// template, or of anything made of several strings.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WithPath is rawURL with its path (an engine's database) replaced; the
// query (mongo's authSource) stays.
func WithPath(rawURL, path string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + path
	return u.String(), nil
}

// ErrNoKit: the engine asked for has no test kit linked into this
// program. The message names the import to add.
var ErrNoKit = errors.New("no test kit linked")

var kits = struct {
	mu sync.RWMutex
	m  map[string]Kit
}{m: map[string]Kit{}}

// Register makes k the test kit of its engine, from the kit package's
// init. It panics when that engine has one already (a programming error,
// as in database/sql).
func Register(k Kit) {
	name := k.Engine().Spec().Name
	kits.mu.Lock()
	defer kits.mu.Unlock()
	if _, dup := kits.m[name]; dup {
		panic("enginetest: Register called twice for engine " + name)
	}
	kits.m[name] = k
}

// KitOf is e's test kit. An engine whose kit is not linked is an error
// matching ErrNoKit that names the import to add.
func KitOf(e engines.Engine) (Kit, error) {
	name := e.Spec().Name
	kits.mu.RLock()
	defer kits.mu.RUnlock()
	if k, ok := kits.m[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("enginetest: %s: %w: add import _ %q (or _ %q for every engine's)", name, ErrNoKit, Import(name), AllImport)
}

// Import is the import path of the test kit of the engine called name.
func Import(name string) string { return engines.Import(name) + "/" + name + "test" }

// AllImport is the package that links every engine's test kit.
const AllImport = engines.AllImport + "/alltest"

// ErrInvalid: a Request the engine's server cannot serve (a copy strategy
// the server's version lacks), or bad options of a test helper.
var ErrInvalid = errors.New("invalid option")
