package pglease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestRenewManyLockedRowOutlastsCall proves that a fenced write on one
// lease that lasts longer than a RenewMany call (it may last its whole
// trust window) costs no other term of the call its renewal: the core
// bounds each RenewMany by the least RenewInterval of its terms and takes
// an error as the failure of every term in it, so the others must come
// back renewed even while the locked term's renewal waits.
func TestRenewManyLockedRowOutlastsCall(t *testing.T) {
	const n = 5
	f := newBulkFixture(t, n+1)
	busy := f.leases[n]
	writing, finished := make(chan struct{}), make(chan struct{})
	finish := sync.OnceFunc(func() { close(finished) })
	t.Cleanup(finish)
	fenced := make(chan error, 1)
	go func() {
		fenced <- f.s.FencedLease(testCtx(t), busy, func(context.Context, pgx.Tx) error {
			close(writing)
			<-finished
			return nil
		})
	}()
	<-writing
	ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
	defer cancel()
	// The locked term first: the others must not wait for its answer.
	terms := append([]elector.Lease{busy}, f.leases[:n]...)
	got, err := f.s.RenewMany(ctx, terms)
	finish()
	require.NoError(t, <-fenced)
	require.Len(t, got, n+1, "RenewMany reported none of the %d terms it renewed while one row was locked (err: %v)", n, err)
	for i, l := range terms[1:] {
		stored, gerr := f.s.Get(testCtx(t), l.Name)
		require.NoError(t, gerr)
		assert.Greater(t, stored.Version, l.Version, "%s renewed in the table", l.Name)
		assert.Equal(t, stored.Version, got[i+1].Version, "%s reported renewed", l.Name)
	}
	if got[0].Token != 0 {
		stored, gerr := f.s.Get(testCtx(t), busy.Name)
		require.NoError(t, gerr)
		assert.Equal(t, stored.Version, got[0].Version, "the locked term is reported renewed only as the table has it")
	}
	if err == nil {
		assert.NotZero(t, got[0], "the locked term is still current: it must not be reported lost")
	}
}

// TestLongFencedWriteEndsNoOtherTerm proves the consequence of the above
// with the core: a fenced write on one lease that runs to the end of its
// term's trust window (the longest Fence allows) ends that term, and must
// end no other term the Store holds.
func TestLongFencedWriteEndsNoOtherTerm(t *testing.T) {
	f := newBulkFixture(t, 0)
	cfg := elector.Config{TTL: 2 * time.Second, RenewInterval: 300 * time.Millisecond, Holder: "a"}
	var terms [2]elector.Term
	for i := range terms {
		e, err := elector.New(f.s, fmt.Sprintf("long-fenced/%d", i), cfg)
		require.NoError(t, err)
		terms[i], err = e.Campaign(testCtx(t))
		require.NoError(t, err)
	}
	busy, other := terms[0], terms[1]
	t.Cleanup(func() {
		_ = other.Resign(testCtx(t))
		_ = busy.Resign(testCtx(t))
	})
	err := f.s.Fenced(elector.ContextWithTerm(testCtx(t), busy), func(ctx context.Context, _ pgx.Tx) error {
		<-ctx.Done() // the end of busy's trust window
		return ctx.Err()
	})
	require.Error(t, err)
	select {
	case <-busy.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the busy term outlived its trust window")
	}
	select {
	case <-other.Done():
		t.Fatalf("a long fenced write on %s ended the term of %s: %v", busy.Lease().Name, other.Lease().Name, other.Err())
	case <-time.After(time.Second): // three RenewIntervals
	}
}
