package leadertest

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

var _ jobs.FencedStore = (*sqlitelease.Store)(nil)

// OpenStore opens a store on a fresh file in t's temporary directory and
// closes it when the test ends.
func OpenStore(t testing.TB) *sqlitelease.Store {
	t.Helper()
	st, err := sqlitelease.Open(filepath.Join(t.TempDir(), "leaderaware.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// Term is an [elector.Term] for one fixed lease. It never renews anything:
// the lease stays current until it expires (TTL one minute in [Lead]), is
// released or is taken over ([Depose]).
type Term struct {
	lease elector.Lease
	done  chan struct{}
	once  sync.Once
}

// NewTerm returns a live term for l.
func NewTerm(l elector.Lease) *Term { return &Term{lease: l, done: make(chan struct{})} }

// Token returns the lease's token.
func (t *Term) Token() uint64 { return t.lease.Token }

// Done is closed by Resign.
func (t *Term) Done() <-chan struct{} { return t.done }

// Err is nil until Resign, then [elector.ErrResigned].
func (t *Term) Err() error {
	select {
	case <-t.done:
		return elector.ErrResigned
	default:
		return nil
	}
}

// Resign ends the term. It does not release the lease; see [Depose].
func (t *Term) Resign(context.Context) error {
	t.once.Do(func() { close(t.done) })
	return nil
}

// Lease returns the lease, so that [elector.LeaseFromContext] finds it.
func (t *Term) Lease() elector.Lease { return t.lease }

// Lead acquires the lease name for holder with a TTL of one minute and
// returns a context carrying a term for it. It fails the test if the lease
// is held.
func Lead(t testing.TB, st elector.Store, name, holder string) (context.Context, elector.Lease) {
	t.Helper()
	l, err := st.TryAcquire(t.Context(), name, holder, time.Minute)
	if err != nil {
		t.Fatalf("acquire %q as %q: %v", name, holder, err)
	}
	return elector.ContextWithTerm(t.Context(), NewTerm(l)), l
}

// Depose ends l's term in the store: it releases l and lets "usurper" take
// the lease, as after a failover. Contexts carrying l must now be refused by
// fenced writes. It returns the usurper's context and lease.
func Depose(t testing.TB, st elector.Store, l elector.Lease) (context.Context, elector.Lease) {
	t.Helper()
	if err := st.Release(t.Context(), l); err != nil {
		t.Fatalf("release %q token %d: %v", l.Name, l.Token, err)
	}
	return Lead(t, st, l.Name, "usurper")
}

// RequireRefused fails the test unless err says the fenced write was
// refused because the term is over.
func RequireRefused(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, elector.ErrLeaseLost) {
		t.Fatalf("got error %v, want one wrapping elector.ErrLeaseLost", err)
	}
}

// CountingStore wraps a [jobs.FencedStore] and counts fenced transactions.
type CountingStore struct {
	jobs.FencedStore
	calls     atomic.Int64 // Fenced calls
	committed atomic.Int64 // Fenced calls that returned nil
}

// Fenced counts the call and delegates it.
func (s *CountingStore) Fenced(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	s.calls.Add(1)
	err := s.FencedStore.Fenced(ctx, fn)
	if err == nil {
		s.committed.Add(1)
	}
	return err
}

// Calls returns how many fenced transactions were attempted.
func (s *CountingStore) Calls() int64 { return s.calls.Load() }

// Committed returns how many fenced transactions committed.
func (s *CountingStore) Committed() int64 { return s.committed.Load() }
