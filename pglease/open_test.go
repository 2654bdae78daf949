package pglease

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// blackHole is a TCP endpoint on loopback that accepts connections and
// never answers, like a server that hung or a firewall that eats packets
// after the handshake.
type blackHole struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// newBlackHole starts a black hole that is closed when t ends.
func newBlackHole(t testing.TB) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackHole{ln: ln}
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		b.wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			_ = c.Close()
		}
	})
	return b
}

func (b *blackHole) port() string {
	return strconv.Itoa(b.ln.Addr().(*net.TCPAddr).Port)
}

// TestParseDSNRequiresDatabase proves that an empty DSN (an unset
// environment variable) and a DSN that names no database are refused
// before anything connects: pgx would connect to a default database and
// elect a second leader there.
func TestParseDSNRequiresDatabase(t *testing.T) {
	t.Setenv("PGDATABASE", "")
	t.Setenv("PGSERVICE", "")
	for _, tt := range []struct{ dsn, want string }{
		{"", "DSN is empty"},
		{"  \t", "DSN is empty"},
		{"postgres://leader@127.0.0.1:5432", "no database"},
		{"postgres://leader@127.0.0.1:5432/", "no database"},
		{"postgres://leader:s3cr3t-pw@127.0.0.1:5432/?sslmode=disable", "no database"},
		{"host=127.0.0.1 user=leader", "no database"},
	} {
		_, err := parseDSN(tt.dsn, options{})
		if assert.Error(t, err, "parseDSN(%q)", tt.dsn) {
			assert.Contains(t, err.Error(), tt.want, "parseDSN(%q)", tt.dsn)
			assert.NotContains(t, err.Error(), "s3cr3t-pw")
		}
	}
	for _, dsn := range []string{
		"postgres://leader@127.0.0.1:5432/app",
		"host=127.0.0.1 user=leader dbname=app",
		"postgresql:///app?host=/var/run/postgresql",
	} {
		_, err := parseDSN(dsn, options{})
		assert.NoError(t, err, "parseDSN(%q)", dsn)
	}
	t.Setenv("PGDATABASE", "fromenv")
	cfg, err := parseDSN("host=127.0.0.1 user=leader", options{})
	require.NoError(t, err, "PGDATABASE names the database explicitly")
	assert.Equal(t, "fromenv", cfg.ConnConfig.Database)
	_, err = parseDSN("", options{})
	assert.Error(t, err, "an empty DSN is refused even when PGDATABASE is set")
}

// TestOpenEmptyDSN proves that Open("") fails at once with an error that
// names the problem, and never connects: the environment points pgx's
// defaults at a black hole that counts connections.
func TestOpenEmptyDSN(t *testing.T) {
	hole := newBlackHole(t)
	t.Setenv("PGHOST", "127.0.0.1")
	t.Setenv("PGPORT", hole.port())
	t.Setenv("PGDATABASE", "")
	t.Setenv("PGCONNECT_TIMEOUT", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, dsn := range []string{"", "sslmode=disable"} {
		s, err := Open(ctx, dsn)
		if s != nil {
			_ = s.Close()
		}
		require.Error(t, err, "Open(%q)", dsn)
		t.Log(err)
		assert.Regexp(t, "DSN is empty|no database", err.Error())
	}
	assert.Zero(t, hole.accepted.Load(), "Open must refuse the DSN before connecting")
}

// TestConnectTimeoutDefault proves that connecting has a bound even when
// the DSN sets none: parseDSN gives every connection defaultConnectTimeout
// unless the DSN sets its own connect_timeout.
func TestConnectTimeoutDefault(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	cfg, err := parseDSN("postgres://leader@127.0.0.1:5432/app", options{})
	require.NoError(t, err)
	assert.Equal(t, defaultConnectTimeout, cfg.ConnConfig.ConnectTimeout)
	assert.Equal(t, 10*time.Second, defaultConnectTimeout, "the documented default")
	cfg, err = parseDSN("postgres://leader@127.0.0.1:5432/app?connect_timeout=3", options{})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, cfg.ConnConfig.ConnectTimeout, "the DSN's connect_timeout wins")
}

// TestOpenBlackHole proves that Open, given a context without a deadline,
// returns an error naming the target when the server accepts TCP and never
// answers, within the connect timeout.
func TestOpenBlackHole(t *testing.T) {
	hole := newBlackHole(t)
	start := time.Now()
	s, err := Open(context.Background(), "postgres://leader@127.0.0.1:"+hole.port()+"/app?sslmode=disable&connect_timeout=1")
	if s != nil {
		_ = s.Close()
	}
	require.Error(t, err)
	t.Log(err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "127.0.0.1")
	assert.Positive(t, hole.accepted.Load())
}

// TestNewRequiresDatabase proves that New, like Open, refuses a pool that
// names no database, such as pgxpool.New(ctx, os.Getenv("UNSET")), before
// connecting.
func TestNewRequiresDatabase(t *testing.T) {
	hole := newBlackHole(t)
	t.Setenv("PGDATABASE", "")
	cfg, err := pgxpool.ParseConfig("host=127.0.0.1 port=" + hole.port() + " user=leader connect_timeout=1")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	_, err = New(context.Background(), pool)
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "no database")
	assert.Zero(t, hole.accepted.Load(), "New must refuse the pool before connecting")
}

// TestOpenReadOnlySession proves that Open refuses a read-only session
// (default_transaction_read_only=on, as on a hot standby, here in the
// DSN), naming target_session_attrs=read-write, on a fresh schema and on
// one whose lease table exists. Before, the second was accepted and every
// campaign failed.
func TestOpenReadOnlySession(t *testing.T) {
	schema := freshSchema(t)
	dsn := dsnWith(t, "default_transaction_read_only", "on")
	for _, what := range []string{"fresh schema", "existing table"} {
		s, err := Open(testCtx(t), dsn, WithSchema(schema))
		if s != nil {
			_, aerr := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
			t.Logf("%s: the read-only store's TryAcquire: %v", what, aerr)
			_ = s.Close()
		}
		if assert.Error(t, err, what) {
			t.Log(err)
			assert.Contains(t, err.Error(), "read-only", what)
			assert.Contains(t, err.Error(), "target_session_attrs=read-write", what)
		}
		openStore(t, WithSchema(schema))
	}
}
