package adaptertest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record, for tests that
// assert what an adapter logged. Its zero value is ready to use.
type LogRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

// Enabled reports true: every level is kept.
func (h *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of r.
func (h *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// WithAttrs returns h itself: the recorder keeps only each record's own
// attributes.
func (h *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h itself.
func (h *LogRecorder) WithGroup(string) slog.Handler { return h }

// Matching returns the records at level whose message contains text.
func (h *LogRecorder) Matching(level slog.Level, text string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			out = append(out, r)
		}
	}
	return out
}

// Attr returns the value of a record's attribute key ("" when absent).
func Attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
