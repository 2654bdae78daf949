package sqlitelease_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// rollbackCase is two Stores on one file, and a write of a lease row by
// hand, as a restore of an older copy of the file leaves it.
func rollbackCase(t *testing.T) rollbacktest.Case {
	path := filepath.Join(t.TempDir(), "leases.db")
	raw := rawDB(t, path)
	return rollbacktest.Case{
		Holder:    openPath(t, path),
		Candidate: openPath(t, path),
		Versions:  true,
		Write: func(t *testing.T, l elector.Lease) {
			res, err := raw.ExecContext(bg(t), `UPDATE leaderaware_lease SET holder = ?2, token = ?3, version = ?4, released = 0
				WHERE name = ?1`, l.Name, l.Holder, int64(l.Token), int64(l.Version))
			require.NoError(t, err)
			n, err := res.RowsAffected()
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "rows written back")
		},
	}
}

// TestRollback: rows rolled back by hand (see rollbacktest).
func TestRollback(t *testing.T) { rollbacktest.Run(t, rollbackCase) }
