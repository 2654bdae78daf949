package pglease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

const secretPW = "s3cr3t-pw"

// TestOpenErrorsHidePassword proves that a DSN that cannot work yields an
// error naming host and database and never the password: nothing listens
// on port 1, and the DSN that does not parse still carries a password.
// It needs no server.
func TestOpenErrorsHidePassword(t *testing.T) {
	for _, tt := range []struct {
		name, dsn string
		want      []string
	}{
		{"url", "postgres://leader:" + secretPW + "@127.0.0.1:1/nosuchdb?sslmode=disable&connect_timeout=5",
			[]string{"127.0.0.1", "nosuchdb"}},
		{"keyword", "host=127.0.0.1 port=1 dbname=nosuchdb user=leader password=" + secretPW + " sslmode=disable connect_timeout=5",
			[]string{"127.0.0.1", "nosuchdb"}},
		{"keyword quoted", "host=127.0.0.1 port=1 dbname=nosuchdb user=leader password='" + secretPW + "' sslmode=disable",
			[]string{"127.0.0.1", "nosuchdb"}},
		{"unknown host", "postgres://leader:" + secretPW + "@nosuchhost.invalid:5432/nosuchdb?connect_timeout=5",
			[]string{"nosuchhost.invalid", "nosuchdb"}},
		{"unparsable url", "postgres://leader:" + secretPW + "@127.0.0.1:notaport/nosuchdb", nil},
		{"unparsable keyword", "host=127.0.0.1 dbname=nosuchdb password=" + secretPW + " sslmode=bogus", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := Open(ctx, tt.dsn)
			if s != nil {
				_ = s.Close()
			}
			require.Error(t, err)
			msg := err.Error()
			t.Log(msg)
			assert.NotContains(t, msg, secretPW)
			var parseErr *pgconn.ParseConfigError
			assert.False(t, errors.As(err, &parseErr), "the error must not carry pgx's ParseConfigError: its ConnString holds the password")
			for _, w := range tt.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

// TestOpenWrongDatabaseHidesPassword proves the same against the real
// server: the host is right, the database does not exist.
func TestOpenWrongDatabaseHidesPassword(t *testing.T) {
	u, err := url.Parse(testDSN(t))
	require.NoError(t, err)
	u.Path = "/" + unique("nosuchdb_")
	u.User = url.UserPassword(u.User.Username(), secretPW)
	_, err = Open(testCtx(t), u.String())
	require.Error(t, err)
	t.Log(err)
	assert.NotContains(t, err.Error(), secretPW)
	assert.Contains(t, err.Error(), u.Hostname())
	assert.Contains(t, err.Error(), u.Path[1:])
}

// TestBackendsTerminated proves recovery when the server kills our
// connections mid-term (pg_terminate_backend from another session, as a
// failover or an administrator would): Renew either succeeds for real or
// fails with a plain error, never ErrLeaseLost and never a false success;
// the pool reconnects; and the listener reconnects, so a release made
// afterwards in another process still wakes a watcher within a bound.
func TestBackendsTerminated(t *testing.T) {
	schema := freshSchema(t)
	app := unique("leaderaware-fault-")
	s := openStore(t, WithSchema(schema), WithApplicationName(app))
	other := openStore(t, WithSchema(schema))
	n := notifyOf(t, s)
	n.listening(t)

	l, err := s.TryAcquire(testCtx(t), "fault", "a", 5*time.Second, elector.Lease{})
	require.NoError(t, err)

	var killed int
	require.NoError(t, rawConn(t).QueryRow(testCtx(t),
		// pg_terminate_backend in the select list runs only on the rows the
		// WHERE kept; in the WHERE the planner could call it on every row.
		`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&killed))
	require.GreaterOrEqual(t, killed, 2, "the pool's connection and the listener's")

	// Renew until it works: every failure must be a plain error, and the
	// success must be real (the server's row says so).
	var renewed elector.Lease
	waitFor(t, 4*time.Second, "renewal after termination", func() bool {
		r, err := s.Renew(testCtx(t), l, 5*time.Second)
		if err != nil {
			require.NotErrorIs(t, err, elector.ErrLeaseLost, "a dead connection is not a lost lease")
			t.Logf("renew after termination: %v", err)
			return false
		}
		renewed = r
		return true
	})
	assert.Equal(t, l.Token, renewed.Token)
	got, err := other.Get(testCtx(t), "fault")
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token)
	assert.Equal(t, renewed.Version, got.Version, "the server must hold the renewal Renew reported")

	// The listener comes back on its own; the release of another process
	// is then reported.
	n.listening(t)
	require.NoError(t, other.Release(testCtx(t), renewed))
	assert.True(t, n.await(wakeBound, isFreed("fault")), "a release after the termination must be reported within %v", wakeBound)
}

// TestListenerBacksOff proves that a listener that cannot connect retries
// with backoff until it is stopped, that stopping it does not wait out a
// backoff, and that its log lines never contain the password.
func TestListenerBacksOff(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	cfg := s.pool.Config().ConnConfig
	cfg.Port = 1 // nothing listens there: every attempt fails
	cfg.Password = secretPW
	var logs syncBuffer
	s.opts.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.secrets = append(s.secrets, secretPW)
	l := &listener{s: s, cfg: cfg, send: func(elector.Change) {}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx)
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cancel()
	<-done
	assert.Less(t, time.Since(start), time.Second, "stop must not wait out a backoff")
	out := logs.String()
	assert.GreaterOrEqual(t, strings.Count(out, "reconnecting"), 2, "the listener must retry:\n%s", out)
	assert.Contains(t, out, "127.0.0.1")
	assert.NotContains(t, out, secretPW)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
