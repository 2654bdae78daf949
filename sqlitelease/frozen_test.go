package sqlitelease_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// frozenWriter starts fn's fenced write through write in a goroutine, as a
// job whose process then freezes: the write's function inserts a row and
// blocks until resume is closed. It returns once the write holds the
// file's write lock; the channel receives the write's result.
func frozenWriter(t *testing.T, write func(fn func(context.Context, *sql.Tx) error) error) (resume chan<- struct{}, result <-chan error) {
	t.Helper()
	frozen, res, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- write(func(ctx context.Context, tx *sql.Tx) error {
			if err := insertPrice(ctx, tx); err != nil {
				return err
			}
			close(frozen)
			<-res
			return nil
		})
	}()
	select {
	case <-frozen:
	case err := <-done:
		t.Fatalf("the fenced write ended before it froze: %v", err)
	}
	return res, done
}

// TestFrozenFencedWriter freezes a job inside a fenced write, in process:
// the write holds SQLite's single write lock, so no lease in the file can
// be written meanwhile, and nobody can take the lease over (no second
// leader). The write ends with the holder's trust window, so the file does
// not stay stalled; its commit after resuming is refused.
func TestFrozenFencedWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	opt := sqlitelease.WithBusyTimeout(10 * time.Millisecond) // the store's retry, not SQLite's sleep
	a, b := openPath(t, path, opt), openPath(t, path, opt)
	rows := jobTable(t, a)
	e, err := elector.New(a, "prices", elector.Config{TTL: 300 * time.Millisecond, Holder: "a"})
	require.NoError(t, err)
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	defer term.Abandon()
	other, err := b.TryAcquire(bg(t), "other-job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)

	resume, result := frozenWriter(t, func(fn func(context.Context, *sql.Tx) error) error {
		return a.Fenced(elector.ContextWithTerm(bg(t), term), fn)
	})
	watched, err := b.Get(bg(t), "prices") // reads go on during the freeze
	require.NoError(t, err)

	// No lease in the file can be written: not a takeover, not another
	// lease's renewal.
	short, cancel := context.WithTimeout(bg(t), 200*time.Millisecond)
	defer cancel()
	_, err = b.TryAcquire(short, "prices", "b", time.Minute, watched)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nobody may take the lease over while the frozen writer holds the lock")
	_, err = b.Renew(short, other, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded, "every lease of the file stalls")

	// The write's context ends with the term's trust window, and with it
	// the transaction (database/sql rolls it back): the file is writable
	// again, although the writer is still frozen.
	require.Eventually(t, func() bool {
		_, err := b.Renew(bg(t), other, time.Minute)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the frozen write keeps the lock past its trust window")
	term.Abandon()

	close(resume)
	err = <-result
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the commit after resuming must be refused: the term's window closed")
	assert.Equal(t, 0, rows())

	// The candidate takes over the lease as it finds it now.
	cur, err := b.Get(bg(t), "prices")
	require.NoError(t, err)
	next, err := b.TryAcquire(bg(t), "prices", "b", time.Minute, cur)
	require.NoError(t, err)
	assert.Greater(t, next.Token, watched.Token)
}

// TestFrozenFencedLeaseWriter is the same freeze with FencedLease, which
// knows no term, only the store's row: the commit after resuming goes
// through, because nobody could change the row meanwhile, and it lands
// before the takeover that was waiting for the lock. The frozen writer's
// next write is refused.
func TestFrozenFencedLeaseWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	opt := sqlitelease.WithBusyTimeout(10 * time.Millisecond)
	a, b := openPath(t, path, opt), openPath(t, path, opt)
	rows := jobTable(t, a)
	l, err := a.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	resume, result := frozenWriter(t, func(fn func(context.Context, *sql.Tx) error) error {
		return a.FencedLease(bg(t), l, fn)
	})
	// A candidate that watched l for its TTL takes it over now, and waits
	// for the lock.
	type acquired struct {
		l   elector.Lease
		err error
	}
	takeover := make(chan acquired, 1)
	go func() {
		next, err := b.TryAcquire(bg(t), "prices", "b", time.Minute, l)
		takeover <- acquired{next, err}
	}()
	select {
	case r := <-takeover:
		t.Fatalf("the takeover went through during the freeze: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}

	close(resume)
	require.NoError(t, <-result, "the row was still the term's: the commit goes through")
	assert.Equal(t, 1, rows())
	r := <-takeover
	require.NoError(t, r.err, "the takeover follows the commit")
	assert.Greater(t, r.l.Token, l.Token)
	require.ErrorIs(t, a.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
	assert.Equal(t, 1, rows())
}
