package pglease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// rollbackCase is two Stores on a table of the test's own, and a write of
// a lease row by hand, as a failover to a standby that lagged leaves it.
func rollbackCase(t *testing.T) rollbacktest.Case {
	schema := freshSchema(t)
	holder := openStore(t, WithSchema(schema))
	raw := rawConn(t)
	return rollbacktest.Case{
		Holder:    holder,
		Candidate: openStore(t, WithSchema(schema)),
		Versions:  true,
		Write: func(t *testing.T, l elector.Lease) {
			tag, err := raw.Exec(testCtx(t), `UPDATE `+holder.Table()+` SET holder = $2, token = $3, version = $4, released = false
				WHERE name = $1`, l.Name, l.Holder, int64(l.Token), int64(l.Version))
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected(), "rows written back")
		},
	}
}

// TestRollback: rows rolled back by hand (see rollbacktest).
func TestRollback(t *testing.T) { rollbacktest.Run(t, rollbackCase) }
