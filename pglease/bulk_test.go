package pglease

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/tcpproxy"
)

// sqlLog records the text of every statement run on the pools it traces.
type sqlLog struct {
	mu  sync.Mutex
	sql []string
}

func (q *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sql = append(q.sql, data.SQL)
	return ctx
}

func (*sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements run since the last take.
func (q *sqlLog) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	sql := q.sql
	q.sql = nil
	return sql
}

// bulkFixture is a store, in a fresh schema, whose statements are logged,
// holding n leases ("bulk/000", ...).
type bulkFixture struct {
	s      *Store
	log    *sqlLog
	leases []elector.Lease
}

func newBulkFixture(t *testing.T, n int) bulkFixture {
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	log := &sqlLog{}
	cfg.ConnConfig.Tracer = log // the lease pool copies it
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := New(testCtx(t), pool, WithSchema(freshSchema(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	f := bulkFixture{s: s, log: log}
	for i := range n {
		l, err := s.TryAcquire(testCtx(t), fmt.Sprintf("bulk/%03d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		f.leases = append(f.leases, l)
	}
	log.take()
	return f
}

// TestGetMany proves that GetMany reads many leases in one statement, each
// as Get reads it, in the order asked, a name asked twice included, with
// the zero Lease but for the Name for a lease released or never taken.
func TestGetMany(t *testing.T) {
	f := newBulkFixture(t, 3)
	require.NoError(t, f.s.Release(testCtx(t), f.leases[1]))
	f.log.take()
	names := []string{"bulk/002", "bulk/001", "never", "bulk/000", "bulk/002"}
	got, err := f.s.GetMany(testCtx(t), names)
	require.NoError(t, err)
	assert.Equal(t, []string{f.s.stmts.GetMany}, f.log.take(), "one statement")
	want := []elector.Lease{f.leases[2], {Name: "bulk/001"}, {Name: "never"}, f.leases[0], f.leases[2]}
	require.Len(t, got, len(want))
	for i := range want {
		assert.True(t, want[i].Written.Equal(got[i].Written), names[i])
		want[i].Written = got[i].Written
	}
	assert.Equal(t, want, got)

	none, err := f.s.GetMany(testCtx(t), nil)
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = f.s.GetMany(testCtx(t), []string{"ok", ""})
	require.Error(t, err, "a bad name is refused")
	assert.Empty(t, f.log.take(), "before any statement")
}

// TestRenewMany proves that RenewMany renews many terms, each for its own
// TTL, in one statement, with the state Renew would return, and the zero
// Lease for a term that is no longer current (taken over or released).
func TestRenewMany(t *testing.T) {
	f := newBulkFixture(t, 4)
	taken, err := f.s.TryAcquire(testCtx(t), "bulk/001", "b", time.Minute, f.leases[1])
	require.NoError(t, err)
	require.NoError(t, f.s.Release(testCtx(t), f.leases[2]))
	f.log.take()
	terms := []elector.Lease{f.leases[0], f.leases[1], f.leases[2], f.leases[3]}
	terms[0].TTL, terms[3].TTL = 10*time.Second, 20*time.Second
	got, err := f.s.RenewMany(testCtx(t), terms)
	require.NoError(t, err)
	log := f.log.take()
	require.NotEmpty(t, log)
	assert.Equal(t, f.s.stmts.RenewMany, log[0], "one statement for the terms it renews")
	for _, sql := range log[1:] {
		assert.Equal(t, f.s.stmts.Renew, sql, "then Renew only for the terms it did not renew")
	}
	require.Len(t, got, 4)
	assert.Zero(t, got[1], "a term taken over")
	assert.Zero(t, got[2], "a term released")
	for _, i := range []int{0, 3} {
		cur, err := f.s.Get(testCtx(t), terms[i].Name)
		require.NoError(t, err)
		assert.Equal(t, terms[i].TTL, got[i].TTL, terms[i].Name)
		assert.Equal(t, [4]any{terms[i].Name, "a", terms[i].Token, cur.Version}, [4]any{got[i].Name, got[i].Holder, got[i].Token, got[i].Version})
		assert.Greater(t, got[i].Version, terms[i].Version)
		assert.Equal(t, cur.TTL, got[i].TTL)
	}
	cur, err := f.s.Get(testCtx(t), "bulk/001")
	require.NoError(t, err)
	assert.Equal(t, taken.Version, cur.Version, "the new holder's lease is untouched")

	none, err := f.s.RenewMany(testCtx(t), nil)
	require.NoError(t, err)
	assert.Empty(t, none)
	bad := terms[0]
	bad.TTL = 0
	_, err = f.s.RenewMany(testCtx(t), []elector.Lease{terms[3], bad})
	require.ErrorContains(t, err, "TTL 0s", "a bad TTL is refused, naming it")
}

// TestRenewManyLockedRow proves that a fenced write in progress on one
// lease, which its renewal waits for, holds up no renewal of another lease
// in the same RenewMany, and that the locked term is renewed, not reported
// lost, once the write ends.
func TestRenewManyLockedRow(t *testing.T) {
	const n = 20
	f := newBulkFixture(t, n+1)
	busy := f.leases[n]
	writing, finished := make(chan struct{}), make(chan struct{})
	finish := sync.OnceFunc(func() { close(finished) })
	t.Cleanup(finish) // before the store closes, should the test fail
	fenced := make(chan error, 1)
	go func() {
		fenced <- f.s.FencedLease(testCtx(t), busy, func(context.Context, pgx.Tx) error {
			close(writing)
			<-finished
			return nil
		})
	}()
	<-writing
	type result struct {
		got []elector.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := f.s.RenewMany(testCtx(t), f.leases)
		done <- result{got, err}
	}()
	// The others are renewed while the busy lease's renewal waits.
	waitFor(t, 10*time.Second, "the other leases renewed", func() bool {
		got, err := f.s.GetMany(testCtx(t), []string{f.leases[0].Name, f.leases[n-1].Name})
		require.NoError(t, err)
		return got[0].Version > f.leases[0].Version && got[1].Version > f.leases[n-1].Version
	})
	select {
	case r := <-done:
		t.Fatalf("RenewMany returned while the fenced write held a row: %+v", r)
	default:
	}
	finish()
	require.NoError(t, <-fenced)
	r := <-done
	require.NoError(t, r.err)
	for i, l := range r.got {
		assert.Greater(t, l.Version, f.leases[i].Version, l.Name)
	}
}

// TestGetManySurvivesDroppedConnection proves that GetMany reads on a fresh
// connection after the lease pool's connections were cut (a restarted
// middlebox: the client sees them close) or frozen (a dead path: nothing
// tells the client; the caller's deadline ends the call that found it).
func TestGetManySurvivesDroppedConnection(t *testing.T) {
	for _, fault := range []string{"cut", "freeze"} {
		t.Run(fault, func(t *testing.T) {
			schema := freshSchema(t)
			writer := openStore(t, WithSchema(schema))
			px, dsn := tcpProxy(t)
			s, err := Open(testCtx(t), dsn, WithSchema(schema))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			l, err := writer.TryAcquire(testCtx(t), "dropped", "a", time.Minute, elector.Lease{})
			require.NoError(t, err)
			read := func() ([]elector.Lease, error) {
				ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
				defer cancel()
				return s.GetMany(ctx, []string{"dropped"})
			}
			got, err := read()
			require.NoError(t, err)
			assert.Equal(t, l.Version, got[0].Version)

			if fault == "cut" {
				px.Cut()
			} else {
				px.Freeze()
				_, err := read()
				require.ErrorIs(t, err, context.DeadlineExceeded, "a frozen connection answers nothing")
			}
			r, err := writer.Renew(testCtx(t), l, time.Minute)
			require.NoError(t, err)
			waitFor(t, 10*time.Second, "a read on a fresh connection", func() bool {
				got, err = read()
				return err == nil
			})
			assert.Equal(t, r.Version, got[0].Version)
		})
	}
}

// tcpProxy starts a tcpproxy in front of the test server, closed when t
// ends, and returns it with a DSN that connects through it.
func tcpProxy(t *testing.T) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(testDSN(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		t.Skipf("the proxy tests need %s to be a postgres:// URL with a host", envDSN)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	px, err := tcpproxy.New(net.JoinHostPort(u.Hostname(), port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	u.Host = px.Addr()
	return px, u.String()
}
