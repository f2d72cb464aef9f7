// Package postgrestest is the postgres engine's test kit
// (enginetest.Kit): it fills a postgres sandbox until it answers "full",
// and hands out per-test databases on a shared postgres server, cloned
// from migrated templates through pools, the way IntegreSQL does (what
// sandboxtest.PostgresDB serves). Importing it registers the kit, and the
// engine.
package postgrestest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres"
)

func init() { enginetest.Register(Kit{}) }

// Kit is the postgres engine's test kit.
type Kit struct{}

// Engine is the postgres engine.
func (Kit) Engine() engines.Engine { return postgres.Engine{} }

// SharedArgs give a shared server room for a connection or more per
// parallel test (the engine's own budget for the shared sandbox's memory
// limit already sizes its WAL and buffers).
func (Kit) SharedArgs() []string { return []string{"-c", "max_connections=400"} }

// NewAllocator hands out clones of templates on the shared server at
// rawURL, through a pool per template that background workers refill.
func (Kit) NewAllocator(rawURL string) (enginetest.Allocator, error) {
	return newPostgresAlloc(rawURL)
}

// CLILogin asks psql, at the URL, for 40 + 2.
func (Kit) CLILogin() (string, string) { return `exec psql "$URL" -tAc 'select 40 + 2'`, "42" }

// pgDiskFull is SQLSTATE 53100, disk_full: "could not extend file ...: No
// space left on device".
const pgDiskFull = "53100"

// Fill inserts rows of an uncompressed text column (storage plain: no
// TOAST compression, so repeated characters weigh their size; chunk must
// stay under postgres's 8 kB page) in batches of about 1 MiB, each its own
// transaction, until an insert fails with SQLSTATE 53100.
func (Kit) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (enginetest.FillResult, error) {
	var res enginetest.FillResult
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return res, engines.LoginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "create table if not exists "+enginetest.FillTable+" (id bigint, v text storage plain)"); err != nil {
		return res, fmt.Errorf("postgres: fill: %w", err)
	}
	perBatch := int64(max(1, (1<<20)/max(chunk, 1)))
	for res.Bytes < limit {
		_, err := conn.Exec(ctx, "insert into "+enginetest.FillTable+" select g, repeat('x', $1) from generate_series($2::bigint, $3::bigint) g",
			chunk, res.Records, res.Records+perBatch-1)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == pgDiskFull:
			res.Full = enginetest.Full(err)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("postgres: fill after %d bytes: %w", res.Bytes, err)
		}
		res.Records += perBatch
		res.Bytes += perBatch * int64(chunk)
	}
	return res, nil
}

// Count counts the rows Fill left.
func (Kit) Count(ctx context.Context, rawURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return 0, engines.LoginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	if err := conn.QueryRow(ctx, "select count(*) from "+enginetest.FillTable).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count: %w", err)
	}
	return n, nil
}
