package testkit

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that concurrent writers (a logger on
// another goroutine, parallel provisions) may write to while the test
// reads it. Its zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
