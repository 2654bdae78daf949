package sqlitelease_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// open opens a store in a new file of t's temp dir and closes it at cleanup.
func open(t *testing.T, opts ...sqlitelease.Option) *sqlitelease.Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "leases.db"), opts...)
}

// openPath opens a store on path and closes it at cleanup.
func openPath(t *testing.T, path string, opts ...sqlitelease.Option) *sqlitelease.Store {
	t.Helper()
	s, err := sqlitelease.Open(path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStore(t *testing.T) {
	electortest.TestStore(t, func(t *testing.T) elector.Store { return open(t) })
}
