package sqlitelease_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestRenewMany: one call renews each current term for its own TTL, stores
// the new versions, and answers the zero Lease for a term that is no longer
// current (an older token, another holder, a released term), in order.
func TestRenewMany(t *testing.T) {
	const n = 50
	s := open(t)
	ctx := bg(t)
	var terms []elector.Lease
	for i := range n {
		l, err := s.TryAcquire(ctx, fmt.Sprintf("job-%02d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		l.TTL = time.Duration(i+1) * time.Second
		terms = append(terms, l)
	}
	older, other, released := terms[0], terms[1], terms[2]
	older.Token--
	other.Holder = "mallory"
	require.NoError(t, s.Release(ctx, released))
	terms = append(terms, older, other)

	got, err := s.RenewMany(ctx, terms)
	require.NoError(t, err)
	require.Len(t, got, len(terms))
	for i, l := range terms {
		if i == 2 || i >= n {
			assert.Equal(t, elector.Lease{}, got[i], "term %d is not current", i)
			continue
		}
		assert.Equal(t, l.Name, got[i].Name)
		assert.Equal(t, l.Token, got[i].Token)
		assert.Greater(t, got[i].Version, l.Version)
		assert.Equal(t, l.TTL, got[i].TTL)
		stored, err := s.Get(ctx, l.Name)
		require.NoError(t, err)
		assert.Equal(t, got[i].Version, stored.Version)
		assert.Equal(t, l.TTL, stored.TTL)
	}

	// One term takes the single statement; none takes nothing.
	one, err := s.RenewMany(ctx, []elector.Lease{got[3]})
	require.NoError(t, err)
	assert.Greater(t, one[0].Version, got[3].Version)
	for _, l := range []elector.Lease{older, other, released} {
		one, err := s.RenewMany(ctx, []elector.Lease{l})
		require.NoError(t, err)
		assert.Equal(t, elector.Lease{}, one[0], "%s of %s token %d is not current", l.Name, l.Holder, l.Token)
	}
	none, err := s.RenewMany(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	bad := got[4]
	bad.TTL = 0
	_, err = s.RenewMany(ctx, []elector.Lease{got[5], bad})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0s", "the error names the value")
}

// TestRenewManyBusy: on a file another connection keeps locked, RenewMany
// waits the lock out while its context lasts, and otherwise fails with the
// context's error, renewing nothing.
func TestRenewManyBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	var terms []elector.Lease
	for _, name := range []string{"a", "b"} {
		l, err := s.TryAcquire(bg(t), name, "h", time.Minute, elector.Lease{})
		require.NoError(t, err)
		terms = append(terms, l)
	}
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	tx, err := db.Begin()
	require.NoError(t, err)

	short, cancel := context.WithTimeout(bg(t), 100*time.Millisecond)
	defer cancel()
	_, err = s.RenewMany(short, terms)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, l := range terms {
		stored, err := s.Get(bg(t), l.Name)
		require.NoError(t, err)
		assert.Equal(t, l.Version, stored.Version, "nothing renewed")
	}

	time.AfterFunc(200*time.Millisecond, func() { _ = tx.Rollback() })
	got, err := s.RenewMany(bg(t), terms)
	require.NoError(t, err, "the lock is waited out")
	for i := range terms {
		assert.Greater(t, got[i].Version, terms[i].Version)
	}
}
