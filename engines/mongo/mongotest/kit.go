// Package mongotest is the mongo engine's test kit (enginetest.Kit) and
// its test helpers: Sandbox (a mongo sandbox per test) and DB (a database
// per test on one shared mongo sandbox per run of test binaries). Importing it is
// what links mongo and mongo-driver into a test binary: sandboxtest alone
// links postgres only.
//
//	func TestEvents(t *testing.T) {
//		db := mongotest.DB(t) // mongodb://…/t_N?authSource=admin, dropped when the test ends
//		...
//	}
package mongotest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/mongo"
	"github.com/roboco/sandboxer/internal/ids"
)

func init() { enginetest.Register(Kit{}) }

// Kit is the mongo engine's test kit.
type Kit struct{}

// Engine is the mongo engine.
func (Kit) Engine() engines.Engine { return mongo.Engine{} }

// SharedArgs are none: a shared mongo server serves a database per test
// as it is.
func (Kit) SharedArgs() []string { return nil }

// closeTimeout bounds closing the allocator's client, whose server may be
// gone already (a killed container).
const closeTimeout = 5 * time.Second

// NewAllocator hands out databases of the shared server at rawURL.
func (Kit) NewAllocator(rawURL string) (enginetest.Allocator, error) {
	c, err := mongodriver.Connect(options.Client().ApplyURI(rawURL))
	if err != nil {
		return nil, err
	}
	return &alloc{url: rawURL, c: c, tag: ids.Hex(3)}, nil
}

// alloc hands out databases of the shared mongo server by name (mongo
// creates a database on its first write), and drops them on release.
// The names carry the allocator's random tag: allocators of other
// processes on the same server never hand out the same one.
type alloc struct {
	url string
	c   *mongodriver.Client
	tag string
	seq atomic.Int64
}

// Acquire names a new database; req asks nothing of mongo.
func (a *alloc) Acquire(context.Context, enginetest.Request) (string, string, error) {
	name := fmt.Sprintf("t_%s_%d", a.tag, a.seq.Add(1))
	url, err := enginetest.WithPath(a.url, name) // the query, authSource=admin, stays
	return name, url, err
}

// Release drops the database.
func (a *alloc) Release(ctx context.Context, name string) error {
	return a.c.Database(name).Drop(ctx)
}

// Tidy has nothing to return: a release drops the database at once.
func (a *alloc) Tidy(context.Context) error { return nil }

// Close disconnects the allocator's client, bounded.
func (a *alloc) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = a.c.Disconnect(ctx)
}

// CLILogin pings with mongosh at the URL. mongosh keeps its state under
// $HOME: a caller without a HOME of its own to write in sets one.
func (Kit) CLILogin() (string, string) {
	return `exec mongosh "$URL" --quiet --eval 'db.runCommand({ping: 1}).ok'`, "1"
}

// client is a mongo-driver client for rawURL with retries off.
func client(rawURL string) (*mongodriver.Client, error) {
	return mongodriver.Connect(options.Client().ApplyURI(rawURL).SetRetryWrites(false).SetRetryReads(false).
		SetServerSelectionTimeout(10 * time.Second))
}

// Fill inserts documents with a string field of chunk bytes, 64 to a batch,
// into the URL's database until an insert fails as full.
func (Kit) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (enginetest.FillResult, error) {
	var res enginetest.FillResult
	c, err := client(rawURL)
	if err != nil {
		return res, engines.LoginError("mongo", rawURL, err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	coll := c.Database(engines.DefaultDatabase).Collection(enginetest.FillTable)
	gen := enginetest.NewPayloads()
	for res.Bytes < limit {
		const perBatch = 64
		docs := make([]any, perBatch)
		for i := range docs {
			docs[i] = bson.D{{Key: "n", Value: res.Records + int64(i)}, {Key: "v", Value: gen.Next(chunk)}}
		}
		r, err := coll.InsertMany(ctx, docs)
		if r != nil {
			res.Records += int64(len(r.InsertedIDs))
			res.Bytes += int64(len(r.InsertedIDs) * chunk)
		}
		switch {
		case err != nil && full(err):
			res.Full = enginetest.Full(err)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("mongo: fill after %d bytes: %w", res.Bytes, err)
		}
	}
	return res, nil
}

// outOfDiskSpace is mongod's OutOfDiskSpace error code
// (src/mongo/base/error_codes.yml), what it answers a write with while its
// disk space monitor finds the data directory full.
const outOfDiskSpace = 14031

// full tells a server's "full" answer: mongod's OutOfDiskSpace, or
// the stand-in's (FerretDB on SQLite) "database or disk is full". A
// dropped connection is never "full": WiredTiger panics on ENOSPC during
// a checkpoint and mongod ends, which is a death, not an answer.
func full(err error) bool {
	if se, ok := errors.AsType[mongodriver.ServerError](err); ok && se.HasErrorCode(outOfDiskSpace) {
		return true
	}
	if mongodriver.IsNetworkError(err) {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "full") || strings.Contains(msg, "no space left")
}

// Count counts the documents Fill left.
func (Kit) Count(ctx context.Context, rawURL string) (int64, error) {
	c, err := client(rawURL)
	if err != nil {
		return 0, engines.LoginError("mongo", rawURL, err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	n, err := c.Database(engines.DefaultDatabase).Collection(enginetest.FillTable).CountDocuments(ctx, bson.D{})
	if err != nil {
		return 0, fmt.Errorf("mongo: count: %w", err)
	}
	return n, nil
}
