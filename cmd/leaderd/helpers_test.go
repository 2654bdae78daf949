package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/sqlitelease"
	"github.com/leaderaware/leaderaware/statuspage"
)

// fastOptions are the options of an instance on db with short timings,
// without balancing: these tests watch each job stay where it was first
// taken. The balanced daemon, with the default flags, is TestThreeReplicas
// and TestDrain's.
func fastOptions(db, holder string) options {
	return options{
		noBalance: true,
		db:        db,
		holder:    holder,
		ttl:       1500 * time.Millisecond,
		renew:     500 * time.Millisecond,
		retry:     500 * time.Millisecond,
		interval:  200 * time.Millisecond,
		secret:    "test-secret",
	}
}

// tempDB returns a path for the lease file in a fresh temporary directory.
func tempDB(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "leaderd.db")
}

// instance is a daemon running in-process under serve.
type instance struct {
	rec  *recorder
	stop context.CancelFunc
	done chan error
}

// startInstance runs serve with o until stopInstance; its log goes to a
// recorder.
func startInstance(t *testing.T, o options) *instance {
	t.Helper()
	if o.control == "" {
		// The default is one per process: one per instance here.
		dir, err := os.MkdirTemp("", "leaderd-test-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.control = filepath.Join(dir, "control.sock")
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{rec: newRecorder(), stop: cancel, done: make(chan error, 1)}
	go func() { in.done <- serve(ctx, o, slog.New(in.rec)) }()
	t.Cleanup(func() { in.stopAndWait(t) })
	return in
}

// stopAndWait stops the instance gracefully and waits for serve to return.
func (in *instance) stopAndWait(t *testing.T) {
	t.Helper()
	in.stop()
	select {
	case err, ok := <-in.done:
		if ok {
			close(in.done)
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return 20 s after its context ended")
	}
}

// recorder is an slog.Handler that counts the instance's leadership
// transitions per job, and keeps every line for failure messages.
type recorder struct {
	mu       sync.Mutex
	leading  map[string]int      // lease → elected − demoted lines
	passes   map[string][]uint64 // job → the token of each pass line
	messages map[string]int      // message → count
	warnings []string            // lines at Warn or above
	httpAddr string              // the addr of the "http listening" line
	lines    bytes.Buffer
	attrs    []slog.Attr // of a handler made by WithAttrs
	shared   *recorder   // the recorder that holds the state
}

func newRecorder() *recorder {
	r := &recorder{leading: map[string]int{}, passes: map[string][]uint64{}, messages: map[string]int{}}
	r.shared = r
	return r
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var line strings.Builder
	line.WriteString(rec.Level.String() + " " + rec.Message)
	job, lease, token, addr := "", "", uint64(0), ""
	add := func(a slog.Attr) bool {
		switch a.Key {
		case "job":
			job = a.Value.String()
		case "lease":
			lease = a.Value.String()
		case "token":
			token = a.Value.Uint64()
		case "addr":
			addr = a.Value.String()
		}
		line.WriteString(" " + a.String())
		return true
	}
	for _, a := range r.attrs {
		add(a)
	}
	rec.Attrs(add)
	s := r.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages[rec.Message]++
	switch rec.Message {
	case "elected": // the decorator's line: job is the job's type
		s.leading[lease]++
	case "demoted":
		s.leading[lease]--
	case passMessages[job], tickMessage:
		s.passes[job] = append(s.passes[job], token)
	case "http listening":
		s.httpAddr = addr
	}
	if rec.Level >= slog.LevelWarn {
		s.warnings = append(s.warnings, line.String())
	}
	s.lines.WriteString(line.String() + "\n")
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{attrs: append(slices.Clip(r.attrs), as...), shared: r.shared}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// leads returns how many terms of job the instance holds now, by its log.
func (r *recorder) leads(job string) int {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return r.shared.leading[job]
}

// url returns the base URL of the instance's HTTP server (its options have
// http set), such as "http://127.0.0.1:41234", once the instance has
// started: the server listens before the jobs start, and a test that ended
// meanwhile would stop the instance during its start.
func (in *instance) url(t *testing.T) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		in.rec.shared.mu.Lock()
		defer in.rec.shared.mu.Unlock()
		addr = in.rec.shared.httpAddr
		return addr != "" && in.rec.shared.messages["leaderd running"] > 0
	}, 10*time.Second, 5*time.Millisecond, "the instance should start and listen for HTTP\n%s", in.rec)
	return "http://" + addr
}

// withHTTP returns o with an HTTP server on a free loopback port.
func withHTTP(o options) options {
	o.http = "127.0.0.1:0"
	return o
}

// passMessages are the messages of the lines the reference jobs log per
// pass; ticks log tickMessage.
var passMessages = map[string]string{
	priceLease:   "prices refreshed",
	webhookLease: "webhooks attempted",
	airdropLease: "airdrops expired",
}

// passTokens returns the tokens of job's pass lines, in order.
func (r *recorder) passTokens(job string) []uint64 {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return slices.Clone(r.shared.passes[job])
}

// count returns how many lines had the message msg.
func (r *recorder) count(msg string) int {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return r.shared.messages[msg]
}

// String returns the recorded lines.
func (r *recorder) String() string {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return r.shared.lines.String()
}

// warns returns the lines at Warn level or above.
func (r *recorder) warns() []string {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return slices.Clone(r.shared.warnings)
}

// statusTable runs `leaderd status` with store (-db file or -pg DSN) and
// returns its table as rows of cells (separated by two spaces or more),
// without the header.
func statusTable(t *testing.T, store ...string) [][]string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"status"}, store...), &stderr, &stdout); code != 0 {
		t.Fatalf("leaderd status: exit code %d, stderr %q", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "JOB") {
		t.Fatalf("leaderd status printed no header:\n%s", stdout.String())
	}
	var rows [][]string
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			break // the members' table follows
		}
		rows = append(rows, cellSep.Split(strings.TrimSpace(l), -1))
	}
	return rows
}

// cellSep separates the cells of a status row.
var cellSep = regexp.MustCompile(` {2,}`)

// expiredAirdrops returns how many airdrops in db have been expired, each
// by a term with a token. It may run on a goroutine of testify's: it
// reports errors with t.Errorf and returns 0.
func expiredAirdrops(t *testing.T, db *sql.DB) int {
	var n int
	err := db.QueryRow(`SELECT count(*) FROM airdropexpiry_airdrops WHERE expired_at IS NOT NULL AND expired_token > 0`).Scan(&n)
	if err != nil {
		t.Errorf("count expired airdrops: %v", err)
		return 0
	}
	return n
}

// demoDB opens the database of the demo's tables, as o names it, and
// closes it when t ends.
func demoDB(t *testing.T, o options) *sql.DB {
	t.Helper()
	if o.pg != "" {
		db, err := sql.Open("pgx", o.pg)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, db.Close()) })
		return db
	}
	s, err := sqlitelease.Open(o.db)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s.DB()
}

// pgDemoDSN returns the DSN of the PostgreSQL test server with a
// search_path of a fresh schema, which leaderd -pg keeps everything in and
// which is dropped when t ends; it skips t if LEADERAWARE_TEST_PG is unset.
func pgDemoDSN(t *testing.T) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	return pgtest.WithSearchPath(dsn, pgtest.Schema(t, dsn, "leaderd_test_"))
}

// mysqlDemoDSN returns the DSN of a fresh database on the MySQL or MariaDB
// test server (LEADERAWARE_TEST_MYSQL), which leaderd -mysql keeps its
// leases in and which is dropped when t ends. Without the variable it
// skips t, unless CI is set: then it fails.
func mysqlDemoDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LEADERAWARE_TEST_MYSQL")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, and LEADERAWARE_TEST_MYSQL is not: set it to the test server's DSN, such as root@tcp(127.0.0.1:3306)/test")
		}
		t.Skip("set LEADERAWARE_TEST_MYSQL=root@tcp(127.0.0.1:3306)/test to run leaderd on MySQL")
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err, "LEADERAWARE_TEST_MYSQL")
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	name := "leaderd_test_" + strings.ToLower(rand.Text()[:12])
	_, err = db.Exec("CREATE DATABASE " + name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := db.Exec("DROP DATABASE " + name)
		assert.NoError(t, err, "drop database %s", name)
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// startEtcd starts an etcd member in the test process, on free loopback
// ports with its data in a temporary directory, and returns its client
// endpoint; t's cleanup stops it. It needs no network and no etcd binary.
func startEtcd(t *testing.T) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "leaderd-test"
	cfg.Dir = t.TempDir()
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // the data dies with the test
	cfg.TickMs, cfg.ElectionMs = 10, 100
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("embedded etcd failed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("embedded etcd was not ready within 20s")
	}
	return client.Host
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// httpClient is the tests' HTTP client: no connection outlives a request,
// so no goroutine outlives a test.
var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get returns the status code and body of a GET of url. It may run on a
// goroutine of testify's: it reports errors with t.Errorf and returns 0.
func get(t *testing.T, url string) (int, string) {
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// statusJSON runs `leaderd status -json` with store and returns its leases.
func statusJSON(t *testing.T, store ...string) []statuspage.Lease {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"status", "-json"}, store...), &stderr, &stdout); code != 0 {
		t.Fatalf("leaderd status -json: exit code %d, stderr %q", code, stderr.String())
	}
	var out struct{ Leases []statuspage.Lease }
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "leaderd status -json printed:\n%s", stdout.String())
	return out.Leases
}

// leasesOf returns the instance's /leases.
func leasesOf(t *testing.T, in *instance) statuspage.Status {
	t.Helper()
	code, body := get(t, in.url(t)+"/leases")
	require.Equal(t, http.StatusOK, code, "/leases: %s", body)
	var p statuspage.Status
	require.NoError(t, json.Unmarshal([]byte(body), &p), "/leases:\n%s", body)
	return p
}
