package leadertest

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

var (
	_ jobdb.FencedStore = (*sqlitelease.Store)(nil)
	_ jobdb.FencedStore = (*jobdb.Postgres)(nil)
)

// OpenStore opens a store on a fresh file in t's temporary directory and
// closes it when the test ends.
func OpenStore(t testing.TB) *sqlitelease.Store {
	t.Helper()
	return openSQLite(t, filepath.Join(t.TempDir(), "leaderaware.db"))
}

// openSQLite opens a store on the file at path and closes it when the test
// ends.
func openSQLite(t testing.TB, path string) *sqlitelease.Store {
	t.Helper()
	st, err := sqlitelease.Open(path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { closeAll(t, st) })
	return st
}

// Store is a handle on a database as the tests use it: its leases
// (elector.Store, for [Lead] and [Depose]) and what the jobs get
// (jobdb.FencedStore).
type Store struct {
	elector.Store
	jobdb.FencedStore
}

// Backend is a database for one test: a fresh SQLite file, or a fresh
// schema on the PostgreSQL server that LEADERAWARE_TEST_PG names (leases and
// job tables alike), dropped when the test ends.
type Backend struct {
	open func(t testing.TB) Store
}

// Run runs f as the subtest "sqlite" and as the subtest "postgres", each on
// a backend of its own. The PostgreSQL one is skipped when
// LEADERAWARE_TEST_PG is unset.
func Run(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "leaderaware.db")
		f(t, Backend{open: func(t testing.TB) Store {
			st := openSQLite(t, path)
			return Store{st, st}
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn, "leadertest_")
		dsn = pgtest.WithSearchPath(dsn, schema)
		f(t, Backend{open: func(t testing.TB) Store {
			st, err := pglease.Open(t.Context(), dsn, pglease.WithSchema(schema))
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			q := jobdb.NewPostgres(st)
			t.Cleanup(func() { closeAll(t, q, st) })
			return Store{st, q}
		}})
	})
}

// Open returns a new handle on b's database, closed when t ends. Handles
// of one backend see one another's leases and rows, like replicas.
func (b Backend) Open(t testing.TB) Store {
	t.Helper()
	return b.open(t)
}

// closeAll closes cs in order and reports their errors.
func closeAll(t testing.TB, cs ...io.Closer) {
	for _, c := range cs {
		if err := c.Close(); err != nil {
			t.Errorf("close %T: %v", c, err)
		}
	}
}

// Term is an [elector.Term] for one fixed lease. It never renews anything:
// the lease stays current in the store until it is released or taken over
// ([Depose]).
type Term struct {
	lease elector.Lease
	done  chan struct{}
	once  sync.Once
	err   error // set once, before done is closed
}

// NewTerm returns a live term for l.
func NewTerm(l elector.Lease) *Term { return &Term{lease: l, done: make(chan struct{})} }

// Token returns the lease's token.
func (t *Term) Token() uint64 { return t.lease.Token }

// Done is closed by Resign or Abandon.
func (t *Term) Done() <-chan struct{} { return t.done }

// Err is nil until Resign or Abandon, then [elector.ErrResigned] or
// [elector.ErrAbandoned].
func (t *Term) Err() error {
	select {
	case <-t.done:
		return t.err
	default:
		return nil
	}
}

// Resign ends the term. It does not release the lease; see [Depose].
func (t *Term) Resign(context.Context) error {
	t.end(elector.ErrResigned)
	return nil
}

// Lease returns the lease, so that [elector.LeaseFromContext] finds it.
func (t *Term) Lease() elector.Lease { return t.lease }

// TrustRemaining is the lease's TTL while the term lasts, 0 after.
func (t *Term) TrustRemaining() time.Duration {
	if t.Err() != nil {
		return 0
	}
	return t.lease.TTL
}

// Abandon ends the term, leaving the lease as it is.
func (t *Term) Abandon() { t.end(elector.ErrAbandoned) }

// end ends the term with err, unless it has ended.
func (t *Term) end(err error) {
	t.once.Do(func() {
		t.err = err
		close(t.done)
	})
}

// Lead acquires the lease name for holder with a TTL of one minute and
// returns a context carrying a term for it. It fails the test if the lease
// is held.
func Lead(t testing.TB, st elector.Store, name, holder string) (context.Context, elector.Lease) {
	t.Helper()
	l, err := st.TryAcquire(t.Context(), name, holder, time.Minute, elector.Lease{})
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

// CountingStore wraps a [jobdb.FencedStore] and counts fenced transactions.
type CountingStore struct {
	jobdb.FencedStore
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
