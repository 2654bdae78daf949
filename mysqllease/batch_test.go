package mysqllease

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestGetMany: each name comes back in order, as Get reads it, or free
// (the zero Lease but for Name) when it was released, never written, or
// its row deleted; a name may come twice.
func TestGetMany(t *testing.T) {
	s := openStore(t, "")
	other := openStore(t, s.opts.table)
	ctx := testCtx(t)
	held, err := other.TryAcquire(ctx, "held", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	rel, err := other.TryAcquire(ctx, "released", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, other.Release(ctx, rel))
	_, err = other.TryAcquire(ctx, "deleted", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = rawDB(t).ExecContext(ctx, "DELETE FROM "+s.Table()+" WHERE name = 'deleted'")
	require.NoError(t, err)

	got, err := s.GetMany(ctx, []string{"released", "held", "never", "deleted", "held"})
	require.NoError(t, err)
	assert.Equal(t, []elector.Lease{{Name: "released"}, held, {Name: "never"}, {Name: "deleted"}, held}, got)

	held, err = other.Renew(ctx, held, 2*time.Minute) // a write elsewhere is read at once
	require.NoError(t, err)
	got, err = s.GetMany(ctx, []string{"held"})
	require.NoError(t, err)
	assert.Equal(t, []elector.Lease{held}, got)

	got, err = s.GetMany(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = s.GetMany(ctx, []string{"held", ""})
	assert.ErrorContains(t, err, "name")
}

// statements returns the count of the server's status variable com
// (Com_select, Com_update) on s's one lease connection.
func statements(t *testing.T, s *Store, com string) int64 {
	t.Helper()
	var (
		name string
		n    int64
	)
	require.NoError(t, s.leases.do(testCtx(t), func(q querier) error {
		return q.QueryRowContext(testCtx(t), "SHOW SESSION STATUS LIKE '"+com+"'").Scan(&name, &n)
	}))
	return n
}

// manyLeases acquires n leases named prefix/i on s and returns them.
func manyLeases(t *testing.T, s *Store, prefix string, n int) []elector.Lease {
	t.Helper()
	ls := make([]elector.Lease, n)
	for i := range ls {
		var err error
		ls[i], err = s.TryAcquire(testCtx(t), fmt.Sprintf("%s/%d", prefix, i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
	}
	return ls
}

func namesOf(ls []elector.Lease) []string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names
}

// TestGetManyOneStatement: GetMany reads 1,000 names with one SELECT, and
// 1,001 with two.
func TestGetManyOneStatement(t *testing.T) {
	s := openStore(t, "", WithLeaseConns(1))
	held := manyLeases(t, s, "many", batchMax)
	names := append(namesOf(held), "one more")
	for _, n := range []int{batchMax, batchMax + 1} {
		before := statements(t, s, "Com_select")
		got, err := s.GetMany(testCtx(t), names[:n])
		require.NoError(t, err)
		assert.Equal(t, int64((n+batchMax-1)/batchMax), statements(t, s, "Com_select")-before, "SELECTs for %d names", n)
		assert.Equal(t, held, got[:batchMax])
	}
}

// TestGetManyNotStarvedByJobs: jobs holding every connection of Store.DB
// do not hold up a bulk read.
func TestGetManyNotStarvedByJobs(t *testing.T) {
	s := openStore(t, "")
	s.DB().SetMaxOpenConns(2)
	holdAll(t, s.DB(), 2)
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	got, err := s.GetMany(ctx, []string{"job"})
	require.NoError(t, err)
	assert.Equal(t, []elector.Lease{{Name: "job"}}, got)
}

// TestRenewMany: each term is renewed for its own TTL and comes back as Get
// then reads it; a term taken over or released comes back as the zero
// Lease and its row is left alone; a term whose row has another version
// than it knows (rolled back, or renewed elsewhere) is still renewed.
func TestRenewMany(t *testing.T) {
	s := openStore(t, "")
	other := openStore(t, s.opts.table)
	ctx := testCtx(t)
	ls := manyLeases(t, s, "renew", 5)
	taken, err := other.TryAcquire(ctx, ls[1].Name, "b", time.Minute, ls[1])
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, ls[2]))
	elsewhere, err := other.Renew(ctx, ls[3], time.Minute)
	require.NoError(t, err)
	for i := range ls {
		ls[i].TTL = time.Duration(i+2) * time.Second
	}

	got, err := s.RenewMany(ctx, ls)
	require.NoError(t, err)
	require.Len(t, got, len(ls))
	cur, err := other.GetMany(ctx, namesOf(ls))
	require.NoError(t, err)
	for _, i := range []int{0, 3, 4} {
		assert.Equal(t, cur[i], got[i], "term %d comes back as written", i)
		assert.Equal(t, ls[i].TTL, cur[i].TTL, "term %d renewed for its own TTL", i)
		assert.Greater(t, got[i].Version, ls[i].Version)
	}
	assert.Greater(t, got[3].Version, elsewhere.Version)
	assert.Equal(t, elector.Lease{}, got[1], "taken over")
	assert.Equal(t, taken, cur[1], "a term taken over is left alone")
	assert.Equal(t, elector.Lease{}, got[2], "released")
	assert.Equal(t, elector.Lease{Name: ls[2].Name}, cur[2], "a released term stays released")

	// The renewed terms renew again, all matched by one statement.
	again, err := s.RenewMany(ctx, []elector.Lease{got[0], got[4]})
	require.NoError(t, err)
	cur, err = other.GetMany(ctx, []string{ls[0].Name, ls[4].Name})
	require.NoError(t, err)
	assert.Equal(t, cur, again)
}

// TestRenewManyOneStatement: RenewMany renews 1,000 terms with one UPDATE
// and no read, and floors the new versions at the server's clock, as Renew
// does, even over a row's small version.
func TestRenewManyOneStatement(t *testing.T) {
	s := openStore(t, "", WithLeaseConns(1))
	ls := manyLeases(t, s, "many", batchMax)
	_, err := rawDB(t).ExecContext(testCtx(t), "UPDATE "+s.Table()+" SET version = 7 WHERE name = ?", ls[0].Name)
	require.NoError(t, err)
	ls[0].Version = 7
	start := time.Now()
	updates, selects := statements(t, s, "Com_update"), statements(t, s, "Com_select")
	got, err := s.RenewMany(testCtx(t), ls)
	require.NoError(t, err)
	assert.Equal(t, int64(1), statements(t, s, "Com_update")-updates, "UPDATEs for 1,000 terms")
	assert.Equal(t, int64(0), statements(t, s, "Com_select")-selects, "SELECTs for 1,000 terms")
	cur, err := s.GetMany(testCtx(t), namesOf(ls))
	require.NoError(t, err)
	assert.Equal(t, cur, got)
	assert.Greater(t, got[0].Version, uint64(start.Add(-time.Hour).UnixMicro()), "the version is floored at the clock")
}

// TestRenewManyBadInput: a name twice in one batch, a bad name or TTL is
// refused with an error naming it, before anything is written.
func TestRenewManyBadInput(t *testing.T) {
	s := openStore(t, "")
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	for _, c := range []struct {
		terms []elector.Lease
		want  string
	}{
		{[]elector.Lease{l, l}, `lease "job" comes twice`},
		{[]elector.Lease{l, {Name: strings.Repeat("n", 300), TTL: time.Minute}}, "name"},
		{[]elector.Lease{{Name: "job", Token: l.Token, Holder: "a", Version: l.Version}}, "lease TTL 0s"},
	} {
		_, err := s.RenewMany(ctx, c.terms)
		assert.ErrorContains(t, err, c.want)
	}
	got, err := s.Get(ctx, "job")
	require.NoError(t, err)
	assert.Equal(t, l, got, "nothing was written")
}
