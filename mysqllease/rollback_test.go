package mysqllease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// rollbackCase is two Stores on a table of the test's own, and a write of
// a lease row by hand, as a failover to a replica that lagged leaves it.
func rollbackCase(t *testing.T) rollbacktest.Case {
	table := freshTable(t)
	holder := openStore(t, table)
	raw := rawDB(t)
	return rollbacktest.Case{
		Holder:    holder,
		Candidate: openStore(t, table),
		Versions:  true,
		Write: func(t *testing.T, l elector.Lease) {
			n, err := affected(raw.ExecContext(testCtx(t), `UPDATE `+holder.Table()+` SET holder = ?, token = ?, version = ?, released = FALSE
				WHERE name = ?`, l.Holder, l.Token, l.Version, l.Name))
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "rows written back")
		},
	}
}

// TestRollback: rows rolled back by hand (see rollbacktest).
func TestRollback(t *testing.T) { rollbacktest.Run(t, rollbackCase) }
