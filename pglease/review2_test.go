package pglease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	got, err := f.s.RenewMany(ctx, f.leases)
	finish()
	require.NoError(t, <-fenced)
	require.Len(t, got, n+1, "RenewMany reported none of the %d terms it renewed while one row was locked (err: %v)", n, err)
	for i, l := range f.leases[:n] {
		stored, gerr := f.s.Get(testCtx(t), l.Name)
		require.NoError(t, gerr)
		assert.Greater(t, stored.Version, l.Version, "%s renewed in the table", l.Name)
		assert.Equal(t, stored.Version, got[i].Version, "%s reported renewed", l.Name)
	}
	if got[n].Token != 0 {
		stored, gerr := f.s.Get(testCtx(t), busy.Name)
		require.NoError(t, gerr)
		assert.Equal(t, stored.Version, got[n].Version, "the locked term is reported renewed only as the table has it")
	}
	if err == nil {
		assert.NotZero(t, got[n], "the locked term is still current: it must not be reported lost")
	}
}
