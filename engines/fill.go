package engines

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Filler is an Engine that can fill its server through the real Go client
// a consumer would use, until the server refuses a write as full. It is
// the one place that knows each engine's "full" error, for the tests that
// prove a full sandbox answers with it and keeps serving, and for the
// bench that measures how much a sandbox holds. Every engine of Default
// implements it (TestEveryEngineCanBeFilled).
type Filler interface {
	// Fill writes records of about chunk bytes each at rawURL (the URL
	// the engine's Env emits) until the server answers a write with its
	// "full" error, or until limit bytes were written. The result says
	// how much the server took and with which error it refused more; the
	// error is for everything else (no connection, another server error).
	Fill(ctx context.Context, rawURL string, chunk int, limit int64) (FillResult, error)
	// Count reads back how many records Fill left at rawURL: a read of
	// the data, which a full sandbox must still serve.
	Count(ctx context.Context, rawURL string) (int64, error)
}

// FillResult is what a Fill got.
type FillResult struct {
	// Records and Bytes are what the server accepted (Bytes counts the
	// records' payload only).
	Records int64
	Bytes   int64
	// Full is the server's refusal of the next write (nil: limit came
	// first). It matches ErrFull.
	Full error
}

// ErrFull is what FillResult.Full matches: the server refused a write
// because its memory budget is used up.
var ErrFull = errors.New("sandbox full")

// fullError is a server's own "full" answer, matching ErrFull.
type fullError struct{ err error }

func (e fullError) Error() string   { return e.err.Error() }
func (e fullError) Unwrap() []error { return []error{ErrFull, e.err} }
func full(err error) error          { return fullError{err} }

// filler makes record payloads: chunk bytes of random hex each, which no
// storage engine's compression (WiredTiger's snappy, redis has none) can
// shrink much, so that what a sandbox holds is measured in bytes a real
// fixture would take.
type filler struct{ rng *rand.ChaCha8 }

func newFiller() filler {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	return filler{rand.NewChaCha8(seed)}
}

func (f filler) payload(chunk int) string {
	b := make([]byte, (chunk+1)/2)
	_, _ = f.rng.Read(b)
	return hex.EncodeToString(b)[:chunk]
}

// fillTable is the table (postgres), key prefix (redis) and collection
// (mongo) Fill writes to.
const fillTable = "sandboxer_fill"

// pgDiskFull is SQLSTATE 53100, disk_full: "could not extend file ...: No
// space left on device".
const pgDiskFull = "53100"

// Fill inserts rows of an uncompressed text column (storage plain: no
// TOAST compression, so repeated characters weigh their size; chunk must
// stay under postgres's 8 kB page) in batches of about 1 MiB, each its own
// transaction, until an insert fails with SQLSTATE 53100.
func (Postgres) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (FillResult, error) {
	var res FillResult
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return res, loginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "create table if not exists "+fillTable+" (id bigint, v text storage plain)"); err != nil {
		return res, fmt.Errorf("postgres: fill: %w", err)
	}
	perBatch := int64(max(1, (1<<20)/max(chunk, 1)))
	for res.Bytes < limit {
		_, err := conn.Exec(ctx, "insert into "+fillTable+" select g, repeat('x', $1) from generate_series($2::bigint, $3::bigint) g",
			chunk, res.Records, res.Records+perBatch-1)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == pgDiskFull:
			res.Full = full(err)
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
func (Postgres) Count(ctx context.Context, rawURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return 0, loginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	if err := conn.QueryRow(ctx, "select count(*) from "+fillTable).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count: %w", err)
	}
	return n, nil
}

// redisClient is a go-redis client for rawURL with retries off.
func redisClient(rawURL string) (*redis.Client, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts.MaxRetries = -1
	return redis.NewClient(opts), nil
}

// Fill sets keys of chunk bytes, 64 to a pipeline, until a SET fails with
// "OOM command not allowed" (maxmemory reached under noeviction).
func (Redis) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (FillResult, error) {
	var res FillResult
	c, err := redisClient(rawURL)
	if err != nil {
		return res, loginError("redis", rawURL, err)
	}
	defer c.Close()
	gen := newFiller()
	for res.Bytes < limit {
		const perPipe = 64
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range int64(perPipe) {
				p.Set(ctx, fmt.Sprintf("%s:%d", fillTable, res.Records+i), gen.payload(chunk), 0)
			}
			return nil
		})
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				if strings.HasPrefix(e.Error(), "OOM ") {
					res.Full = full(e)
					return res, nil
				}
				return res, fmt.Errorf("redis: fill after %d bytes: %w", res.Bytes, e)
			}
			res.Records++
			res.Bytes += int64(chunk)
		}
		if err != nil {
			return res, fmt.Errorf("redis: fill after %d bytes: %w", res.Bytes, err)
		}
	}
	return res, nil
}

// Count counts the keys Fill left (DBSIZE: Fill writes to an otherwise
// empty database).
func (Redis) Count(ctx context.Context, rawURL string) (int64, error) {
	c, err := redisClient(rawURL)
	if err != nil {
		return 0, loginError("redis", rawURL, err)
	}
	defer c.Close()
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: count: %w", err)
	}
	return n, nil
}

// mongoClient is a mongo-driver client for rawURL with retries off.
func mongoClient(rawURL string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(rawURL).SetRetryWrites(false).SetRetryReads(false).
		SetServerSelectionTimeout(10 * time.Second))
}

// Fill inserts documents with a string field of chunk bytes, 64 to a batch,
// into the URL's database until an insert fails as full.
func (Mongo) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (FillResult, error) {
	var res FillResult
	c, err := mongoClient(rawURL)
	if err != nil {
		return res, loginError("mongo", rawURL, err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	coll := c.Database(DefaultDatabase).Collection(fillTable)
	gen := newFiller()
	for res.Bytes < limit {
		const perBatch = 64
		docs := make([]any, perBatch)
		for i := range docs {
			docs[i] = bson.D{{Key: "n", Value: res.Records + int64(i)}, {Key: "v", Value: gen.payload(chunk)}}
		}
		r, err := coll.InsertMany(ctx, docs)
		if r != nil {
			res.Records += int64(len(r.InsertedIDs))
			res.Bytes += int64(len(r.InsertedIDs) * chunk)
		}
		switch {
		case err != nil && mongoFull(err):
			res.Full = full(err)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("mongo: fill after %d bytes: %w", res.Bytes, err)
		}
	}
	return res, nil
}

// mongoOutOfDiskSpace is mongod's OutOfDiskSpace error code
// (src/mongo/base/error_codes.yml), what it answers a write with while its
// disk space monitor finds the data directory full.
const mongoOutOfDiskSpace = 14031

// mongoFull tells a server's "full" answer: mongod's OutOfDiskSpace, or
// the stand-in's (FerretDB on SQLite) "database or disk is full". A
// dropped connection is never "full": WiredTiger panics on ENOSPC during
// a checkpoint and mongod ends, which is a death, not an answer.
func mongoFull(err error) bool {
	if se, ok := errors.AsType[mongo.ServerError](err); ok && se.HasErrorCode(mongoOutOfDiskSpace) {
		return true
	}
	if mongo.IsNetworkError(err) {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "full") || strings.Contains(msg, "no space left")
}

// Count counts the documents Fill left.
func (Mongo) Count(ctx context.Context, rawURL string) (int64, error) {
	c, err := mongoClient(rawURL)
	if err != nil {
		return 0, loginError("mongo", rawURL, err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	n, err := c.Database(DefaultDatabase).Collection(fillTable).CountDocuments(ctx, bson.D{})
	if err != nil {
		return 0, fmt.Errorf("mongo: count: %w", err)
	}
	return n, nil
}
