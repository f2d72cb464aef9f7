package enginetest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"time"
)

// Filler fills an engine's server through the real Go client a consumer
// would use, until the server refuses a write as full. It is the one place
// that knows each engine's "full" error, for the tests that prove a full
// sandbox answers with it and keeps serving, and for the bench that
// measures how much a sandbox holds. Every engine's kit implements it.
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

// Full marks err, a server's own "full" answer, as matching ErrFull (and
// still err).
func Full(err error) error { return fullError{err} }

// FillTable is the table (postgres), key prefix (redis) and collection
// (mongo) Fill writes to.
const FillTable = "sandboxer_fill"

// Payloads makes record payloads: chunk bytes of random hex each, which
// no storage engine's compression (WiredTiger's snappy, redis has none)
// can shrink much, so that what a sandbox holds is measured in bytes a
// real fixture would take.
type Payloads struct{ rng *rand.ChaCha8 }

// NewPayloads returns a payload maker seeded from the clock.
func NewPayloads() Payloads {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	return Payloads{rand.NewChaCha8(seed)}
}

// Next is a payload of chunk bytes.
func (p Payloads) Next(chunk int) string {
	b := make([]byte, (chunk+1)/2)
	_, _ = p.rng.Read(b)
	return hex.EncodeToString(b)[:chunk]
}
