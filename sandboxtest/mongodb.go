package sandboxtest

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongoAlloc hands out databases of the shared mongo server by name (mongo
// creates a database on its first write), and drops them on release.
type mongoAlloc struct {
	url string
	c   *mongo.Client
	seq atomic.Int64
}

func newMongoAlloc(rawURL string) (*mongoAlloc, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(rawURL))
	if err != nil {
		return nil, err
	}
	return &mongoAlloc{url: rawURL, c: c}, nil
}

func (a *mongoAlloc) acquire(context.Context, DBOptions) (string, string, error) {
	name := fmt.Sprintf("t_%d", a.seq.Add(1))
	url, err := withPath(a.url, name) // the query, authSource=admin, stays
	return name, url, err
}

func (a *mongoAlloc) release(ctx context.Context, name string) error {
	return a.c.Database(name).Drop(ctx)
}

func (a *mongoAlloc) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = a.c.Disconnect(ctx)
}
