// Package logbuf is a buffer for the output of a logger that writes from
// other goroutines, for tests.
package logbuf

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is ready
// to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records parses each line written so far as a JSON object, failing t on a
// line that is not one.
func (b *Buffer) Records(t testing.TB) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// JSONLogger returns a logger that writes JSON, at Debug and above, to a
// new Buffer.
func JSONLogger() (*slog.Logger, *Buffer) {
	b := new(Buffer)
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// CaptureDefault makes slog.Default a [JSONLogger] until t ends and returns
// its Buffer.
func CaptureDefault(t testing.TB) *Buffer {
	l, b := JSONLogger()
	prev := slog.Default()
	slog.SetDefault(l)
	t.Cleanup(func() { slog.SetDefault(prev) })
	return b
}
