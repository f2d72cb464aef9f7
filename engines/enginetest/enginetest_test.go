package enginetest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
)

// kv is an engine no kit is registered for.
type kv struct{ engines.Engine }

func (kv) Spec() engines.Spec {
	return engines.Spec{Name: "kv", Short: "kv", Order: 1, Image: "kv:1", Port: 1, ReadyTimeout: time.Second}
}

// TestKitNotLinked: an engine whose kit this program does not link is an
// error matching ErrNoKit that names the import to add.
func TestKitNotLinked(t *testing.T) {
	_, err := enginetest.KitOf(kv{})
	require.ErrorIs(t, err, enginetest.ErrNoKit)
	assert.Contains(t, err.Error(), `add import _ "github.com/roboco/sandboxer/engines/kv/kvtest"`)
	assert.Contains(t, err.Error(), `_ "github.com/roboco/sandboxer/engines/all/alltest"`)
}

// TestWithPath: the database is the URL's path; the query stays.
func TestWithPath(t *testing.T) {
	got, err := enginetest.WithPath("mongodb://u:p@127.0.0.1:1/sandbox?authSource=admin", "t_1")
	require.NoError(t, err)
	assert.Equal(t, "mongodb://u:p@127.0.0.1:1/t_1?authSource=admin", got)
}
