package sandboxtest

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	goruntime "runtime"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/engines/enginetest"
)

// Migrations are what a postgres template is built with (postgrestest's
// allocator clones every database of a test from it), once per shared
// server per set (the test binaries that share a server share its
// templates): a set is known by a hash of its content (the .sql files'
// names and bytes, or a function's name and version), so tests that pass
// equal migrations share one template.
type Migrations struct {
	key   string
	apply func(ctx context.Context, url string) error
	err   error
}

// MigrateFunc is a migration set run by fn against url, the template
// database's connection URL (with pgx, database/sql, or a migration tool).
// version tells apart two sets a function builds (say, its migrations'
// directory): the set is known by fn's name and version, so version must
// change when what fn applies does, for test binaries of other builds
// that share the server meanwhile.
func MigrateFunc(version string, fn func(ctx context.Context, url string) error) Migrations {
	name := goruntime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return Migrations{key: enginetest.Key("func", name, version), apply: fn}
}

// MigrateFS is the .sql files at the root of fsys, applied in name order
// (each file in one round trip, so it may hold several statements);
// fs.Sub selects a directory. A file that cannot be read fails the tests
// that use the set.
func MigrateFS(fsys fs.FS) Migrations {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return Migrations{err: fmt.Errorf("migrations: %w", err)}
	}
	slices.Sort(names)
	parts := []string{"fs"}
	files := make([]string, len(names))
	for i, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return Migrations{err: fmt.Errorf("migrations: %w", err)}
		}
		files[i] = string(b)
		parts = append(parts, n, files[i])
	}
	return Migrations{key: enginetest.Key(parts...), apply: func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for i, sql := range files {
			// No arguments: pgx sends it as one simple query, several
			// statements allowed.
			if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s: %w", path.Base(names[i]), err)
			}
		}
		return nil
	}}
}

// request is what a test asks of its postgres database: a clone of the
// template m builds, from a pool of pool (0: postgrestest.DefaultPool),
// copied with strategy ("": postgrestest.DefaultStrategy).
func (m Migrations) request(pool int, strategy string) (enginetest.Request, error) {
	if m.err != nil {
		return enginetest.Request{}, m.err
	}
	if m.apply == nil {
		m.key = enginetest.Key("empty")
	}
	return enginetest.Request{Template: m.key, Migrate: m.apply, Pool: pool, Strategy: strategy}, nil
}
