package mysqllease

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestOpenBadInput: a bad DSN or option is refused before anything is
// opened, with an error that names it and never the password.
func TestOpenBadInput(t *testing.T) {
	const pw = "s3cret-pw"
	for _, c := range []struct {
		name, dsn string
		opts      []Option
		want      string
	}{
		{"empty DSN", "", nil, "DSN is empty"},
		{"blank DSN", "  ", nil, "DSN is empty"},
		{"no database", "app:" + pw + "@tcp(db.example:3306)/", nil, "app@tcp(db.example:3306)/ names no database"},
		{"no database, no slash", "app:" + pw + "@tcp(db.example:3306)", nil, "missing the slash"},
		{"unterminated address", "app:" + pw + "@tcp(db.example:3306/app", nil, `DSN "app:xxxxx@tcp(db.example:3306/app" is not of the form`},
		{"bad parameter", "app:" + pw + "@tcp(db.example:3306)/app?readTimeout=soon", nil, `"soon"`},
		{"removed strict parameter", "app:" + pw + "@tcp(db.example:3306)/app?strict=true", nil, "strict mode has been removed"},
		{"empty table", "app@tcp(x)/app", []Option{WithTable("")}, "table name is empty"},
		{"table with a dash", "app@tcp(x)/app", []Option{WithTable("lease-s")}, `table name "lease-s" has the character '-'`},
		{"table with a backquote", "app@tcp(x)/app", []Option{WithTable("a`b")}, "has the character '`'"},
		{"table too long", "app@tcp(x)/app", []Option{WithTable(strings.Repeat("t", 57))}, "is 57 bytes; at most 56"},
		{"no lease connections", "app@tcp(x)/app", []Option{WithLeaseConns(0)}, "lease connections 0 must be between 1 and 64"},
		{"too many lease connections", "app@tcp(x)/app", []Option{WithLeaseConns(1000)}, "lease connections 1000"},
		{"no poll interval", "app@tcp(x)/app", []Option{WithPollInterval(0)}, "poll interval 0s must be between 10ms and 1m0s"},
		{"poll interval too long", "app@tcp(x)/app", []Option{WithPollInterval(time.Hour)}, "poll interval 1h0m0s must be"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			s, err := Open(context.Background(), c.dsn, c.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), pw)
			assert.Less(t, time.Since(start), time.Second, "a bad input is refused before anything is opened")
		})
	}
	_, err := New(nil)
	require.ErrorContains(t, err, "nil *sql.DB")
	_, err = New(&sql.DB{}, WithTable("no good"))
	require.ErrorContains(t, err, `table name "no good"`)
}

// TestMalformedDSN: a DSN that does not parse is named, without its
// password, next to the form expected and the driver's reason.
func TestMalformedDSN(t *testing.T) {
	const form = "is not of the form user:password@tcp(host:3306)/dbname?param=value: "
	for _, c := range []struct{ dsn, want string }{
		{"app:s3cret@db.example:3306/app", `mysqllease: DSN "app:xxxxx@db.example:3306/app" ` + form + "default addr for network 'db.example:3306' unknown"},
		{"mysql://app:s3cret@db.example:3306/app", `mysqllease: DSN "mysql:xxxxx@db.example:3306/app" ` + form},
		{"app:s3cret@tcp(db.example:3306/app", `mysqllease: DSN "app:xxxxx@tcp(db.example:3306/app" ` + form + "invalid DSN: network address not terminated"},
		{"db.example", `mysqllease: DSN "db.example" ` + form + "invalid DSN: missing the slash"},
		{"app:s3cret@tcp(db.example)/app?strict=true", `mysqllease: DSN "app:xxxxx@tcp(db.example)/app?strict=true" ` + form + "strict mode has been removed"},
	} {
		_, err := parseDSN(c.dsn)
		require.Error(t, err, c.dsn)
		assert.Contains(t, err.Error(), c.want)
		assert.NotContains(t, err.Error(), "s3cret")
	}
}

// TestDSNDefaults: the timeouts a DSN leaves unset get defaults; those it
// sets, zero included, stay.
func TestDSNDefaults(t *testing.T) {
	cfg, err := parseDSN("u:p@tcp(h:3306)/db")
	require.NoError(t, err)
	assert.Equal(t, DefaultDialTimeout, cfg.Timeout)
	assert.Equal(t, DefaultReadTimeout, cfg.ReadTimeout)
	assert.Equal(t, DefaultWriteTimeout, cfg.WriteTimeout)

	cfg, err = parseDSN("u:p?x/y@tcp(h:3306)/db?readTimeout=0&timeout=3s&parseTime=true")
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, cfg.Timeout)
	assert.Zero(t, cfg.ReadTimeout, "readTimeout=0 turns the read timeout off")
	assert.Equal(t, DefaultWriteTimeout, cfg.WriteTimeout)
	assert.Equal(t, "p?x/y", cfg.Passwd)
	assert.Equal(t, "p?x/y", passwordOf("u:p?x/y@tcp(h:3306)/db?readTimeout=0"))
}

// TestOpenUnreachable: a refused connection fails at once, naming the
// address and not the password.
func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now
	start := time.Now()
	_, err = Open(context.Background(), "app:s3cret-pw@tcp("+addr+")/app")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "connect to app@tcp("+addr+")/app")
	assert.Contains(t, err.Error(), "refused")
	assert.NotContains(t, err.Error(), "s3cret-pw")
}

// silentServer accepts connections and never answers, like a host whose
// database hung. It stops when t ends.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestOpenSilentServer: a server that never answers fails Open within the
// DSN's readTimeout, or the context's deadline; it never hangs.
func TestOpenSilentServer(t *testing.T) {
	addr := silentServer(t)
	start := time.Now()
	_, err := Open(context.Background(), "app:s3cret-pw@tcp("+addr+")/app?readTimeout=300ms")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second, "readTimeout bounds Open")
	assert.Contains(t, err.Error(), "app@tcp("+addr+")/app")
	assert.NotContains(t, err.Error(), "s3cret-pw")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = Open(ctx, "app:s3cret-pw@tcp("+addr+")/app")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second, "the context bounds Open")
}

// serverDSN returns the test server's DSN with user, password or database
// changed by edit.
func serverDSN(t *testing.T, edit func(*mysql.Config)) string {
	cfg, err := mysql.ParseDSN(testDSN(t))
	require.NoError(t, err)
	edit(cfg)
	return cfg.FormatDSN()
}

func TestOpenWrongPassword(t *testing.T) {
	var user string
	dsn := serverDSN(t, func(c *mysql.Config) { user, c.Passwd = c.User, "wrong-pw-4711" })
	_, err := Open(testCtx(t), dsn, WithTable(freshTable(t)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check the user and password")
	assert.Contains(t, err.Error(), user+"@tcp(")
	assert.NotContains(t, err.Error(), "wrong-pw-4711")
	assert.True(t, isMySQLError(err, errAccessDenied), "the driver's error is wrapped: %v", err)
}

func TestOpenUnknownDatabase(t *testing.T) {
	dsn := serverDSN(t, func(c *mysql.Config) { c.DBName = "leaderaware_no_such_db" })
	_, err := Open(testCtx(t), dsn, WithTable(freshTable(t)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/leaderaware_no_such_db: the database does not exist")
}

func TestNewWithoutDatabase(t *testing.T) {
	db, err := sql.Open("mysql", serverDSN(t, func(c *mysql.Config) { c.DBName = "" }))
	require.NoError(t, err)
	defer db.Close()
	_, err = New(db, WithTable(freshTable(t)))
	require.ErrorContains(t, err, "no default database")
}

// TestOpenTableMissing: a version table without its lease table is
// reported, not papered over with a new empty table.
func TestOpenTableMissing(t *testing.T) {
	s := openStore(t, "")
	_, err := rawDB(t).ExecContext(testCtx(t), "DROP TABLE "+s.Table())
	require.NoError(t, err)
	_, err = Open(testCtx(t), testDSN(t), WithTable(s.opts.table))
	require.ErrorIs(t, err, ErrTableMissing)
	assert.Contains(t, err.Error(), "the lease table "+s.Table()+" is gone")
	_, err = New(rawDB(t), WithTable(s.opts.table))
	require.ErrorIs(t, err, ErrTableMissing)
}

func TestOpenNotALeaseTable(t *testing.T) {
	table := freshTable(t)
	_, err := rawDB(t).ExecContext(testCtx(t), "CREATE TABLE "+quote(table)+" (id INT PRIMARY KEY)")
	require.NoError(t, err)
	_, err = Open(testCtx(t), testDSN(t), WithTable(table))
	require.ErrorContains(t, err, "exists but is not a mysqllease lease table")
}

func TestOpenSchemaTooNew(t *testing.T) {
	s := openStore(t, "")
	_, err := rawDB(t).ExecContext(testCtx(t), "UPDATE "+quote(s.opts.table+versionSuffix)+" SET version = 99")
	require.NoError(t, err)
	_, err = Open(testCtx(t), testDSN(t), WithTable(s.opts.table))
	require.ErrorIs(t, err, ErrSchemaTooNew)
	assert.Contains(t, err.Error(), "version 99")
}

// TestConcurrentOpen: replicas starting together on a fresh database all
// open, and share one table.
func TestConcurrentOpen(t *testing.T) {
	table := freshTable(t)
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(testCtx(t), testDSN(t), WithTable(table))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "Open %d", i)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	l, err := stores[0].TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	got, err := stores[n-1].Get(testCtx(t), "job")
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token)
}

// TestOpenDefaultTable: with no options the store uses DefaultTable.
func TestOpenDefaultTable(t *testing.T) {
	db := rawDB(t)
	var exists int
	require.NoError(t, db.QueryRowContext(testCtx(t), `SELECT COUNT(*) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, DefaultTable).Scan(&exists))
	if exists == 0 { // ours to remove
		t.Cleanup(func() { dropTables(t, testDSN(t), DefaultTable) })
	}
	s, err := Open(testCtx(t), testDSN(t))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "`leaderaware_leases`", s.Table())
}

// TestOpenAutocommitOff: autocommit=0 in the DSN, a common ORM setting,
// leaves lease writes committed and seen by other sessions: Open turns
// autocommit on for its lease connections, also when a collation keeps them
// from interpolating. New, whose connections are the caller's, refuses such
// a pool rather than lead on writes nobody sees.
func TestOpenAutocommitOff(t *testing.T) {
	for _, collation := range []string{"", "big5_chinese_ci"} {
		t.Run("collation="+collation, func(t *testing.T) {
			table := freshTable(t)
			dsn := serverDSN(t, func(c *mysql.Config) {
				c.Params = map[string]string{"autocommit": "0"}
				if collation != "" {
					c.Collation = collation
				}
			})
			a, err := Open(testCtx(t), dsn, WithTable(table))
			require.NoError(t, err)
			defer a.Close()
			l, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
			require.NoError(t, err)

			// Uncommitted, the first Open's schema writes would hold the
			// next Open for the whole readTimeout.
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			b, err := Open(ctx, testDSN(t), WithTable(table))
			require.NoError(t, err, "a second Open on the table")
			defer b.Close()
			got, err := b.Get(ctx, "job")
			require.NoError(t, err, "another session sees the lease")
			assert.Equal(t, l.Token, got.Token)

			db, err := sql.Open("mysql", dsn)
			require.NoError(t, err)
			defer db.Close()
			_, err = New(db, WithTable(table))
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), "autocommit=0")
		})
	}
}

// TestOpenReadOnlySession: a read-only session (tx_read_only=1 in the DSN,
// or a server's default) is refused at Open, before it fails every
// campaign, even on a lease table that is there already.
func TestOpenReadOnlySession(t *testing.T) {
	s := openStore(t, "")
	dsn := serverDSN(t, func(c *mysql.Config) { c.Params = map[string]string{"tx_read_only": "1"} })
	ro, err := Open(testCtx(t), dsn, WithTable(s.opts.table))
	if ro != nil {
		_, aerr := ro.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
		t.Logf("the read-only store's TryAcquire: %v", aerr)
		_ = ro.Close()
	}
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "read-only")
	assert.Contains(t, err.Error(), "tx_read_only")
}
