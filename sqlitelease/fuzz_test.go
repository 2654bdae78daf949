package sqlitelease_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leaderaware/leaderaware/sqlitelease"
)

// FuzzOpenPath checks that Open, given any file name inside a directory,
// either opens a store on exactly that file or returns an error that names
// the path, and never panics.
func FuzzOpenPath(f *testing.F) {
	for _, seed := range []string{"leases.db", "a b.db", "x?mode=ro", "file:x.db", "%41.db", "dir/x.db", "..", "", "\x00", "a#b", "日本.db", "x.db-wal"} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, name string) {
		path := filepath.Join(dir, name)
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Skip("outside the test directory")
		}
		s, err := sqlitelease.Open(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sqlitelease: ") || !strings.Contains(err.Error(), strconv.Quote(path)) {
				t.Fatalf("Open(%q): error %q does not name the package and the path", path, err)
			}
			return
		}
		defer func() {
			if err := s.Close(); err != nil {
				t.Fatalf("Close after Open(%q): %v", path, err)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix)
			}
		}()
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("Open(%q) succeeded but the file is not there: %v", path, err)
		}
	})
}
