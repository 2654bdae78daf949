package sqlitelease_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestTokensNeverGoBackFileDeletedClockStepped defeats both guards inside
// the file at once, as the chaos run did: the last token came from a wall
// clock an hour ahead, then the file is deleted (with it the high-water
// mark in leaderaware_meta) and the clock stepped back. The high-water mark
// in <db>-live, which outlives the database file, must hold.
func TestTokensNeverGoBackFileDeletedClockStepped(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between runs after the first term, with the store closed
		// (closed) or open (the file is deleted under it, as in the chaos
		// run), with the option of the stepped clock.
		closed  bool
		between func(t *testing.T, path string, stepped sqlitelease.Option)
	}{
		{name: "closed, then deleted", closed: true},
		{name: "deleted under the store"},
		{name: "mark missing from -live, seeded by Open", closed: true, between: func(t *testing.T, path string, stepped sqlitelease.Option) {
			// As a file whose tokens an older release issued: its -live
			// is empty. An Open before the deletion records the file's
			// mark there.
			require.NoError(t, os.Truncate(path+"-live", 0))
			s, err := sqlitelease.Open(path, stepped)
			require.NoError(t, err)
			require.NoError(t, s.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			c := stepclock.New()
			c.Step(time.Hour)
			stepped := sqlitelease.WithClock(c)
			s, err := sqlitelease.Open(path, stepped)
			require.NoError(t, err)
			before := acquireReleased(t, s, "job", "a")
			if tc.closed {
				require.NoError(t, s.Close())
			}
			if tc.between != nil {
				tc.between(t, path, stepped)
			}

			for _, suffix := range []string{"", "-wal", "-shm"} { // rm app.db app.db-wal app.db-shm
				if err := os.Remove(path + suffix); !errors.Is(err, fs.ErrNotExist) {
					require.NoError(t, err)
				}
			}
			c.Step(-time.Hour)
			if !tc.closed {
				require.NoError(t, s.Close())
			}

			s = openPath(t, path)
			after, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
			require.NoError(t, err)
			assert.Greater(t, after.Token, before.Token, "a token below an issued one came out of a new file")
		})
	}
}
