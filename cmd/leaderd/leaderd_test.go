package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
	"github.com/leaderaware/leaderaware/statuspage"
)

// validSignature reports whether header is the X-Signature that
// webhookretry documents for body under secret.
func validSignature(secret, body []byte, header string) bool {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal([]byte(header), []byte("sha256="+hex.EncodeToString(m.Sum(nil))))
}

// TestTwoInstances runs two daemons on one store, SQLite (-db), PostgreSQL
// (-pg), etcd (-etcd) and MySQL (-mysql): each job leads on exactly one of
// them, and its leader logs every pass with its token; status, status
// -json and /leases list the three jobs with their holders; when one daemon
// stops, the other leads every job within a second and logs their passes
// with larger tokens.
func TestTwoInstances(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db := tempDB(t)
		testTwoInstances(t, func(holder string) options { return fastOptions(db, holder) }, "-db", db)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgDemoDSN(t)
		testTwoInstances(t, func(holder string) options {
			o := fastOptions("", holder)
			o.pg = dsn
			return o
		}, "-pg", dsn)
	})
	t.Run("etcd", func(t *testing.T) {
		endpoint := startEtcd(t)
		testTwoInstances(t, func(holder string) options {
			o := fastOptions("", holder)
			o.etcd = []string{endpoint}
			return o
		}, "-etcd", endpoint)
	})
	t.Run("mysql", func(t *testing.T) {
		dsn := mysqlDemoDSN(t)
		testTwoInstances(t, func(holder string) options {
			o := fastOptions("", holder)
			o.mysql = dsn
			return o
		}, "-mysql", dsn)
	})
}

func testTwoInstances(t *testing.T, opts func(holder string) options, store ...string) {
	a := startInstance(t, withHTTP(opts("instance-a")))
	// b starts once a leads every job, so that each job moves to b, with a
	// new term, when a stops (and once a has created the SQLite file: two
	// first Opens of a new file at once can fail with SQLITE_BUSY, a
	// sqlitelease issue, reported).
	require.Eventually(t, func() bool {
		for _, job := range leases {
			if a.rec.leads(job) != 1 {
				return false
			}
		}
		return a.rec.count("leaderd running") == 1
	}, 5*time.Second, 5*time.Millisecond, "a should start and lead every job\n%s", a.rec)
	b := startInstance(t, withHTTP(opts("instance-b")))

	eachOnOne := func() bool {
		for _, job := range leases {
			if a.rec.leads(job)+b.rec.leads(job) != 1 || a.rec.leads(job) < 0 || b.rec.leads(job) < 0 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, eachOnOne, 5*time.Second, 10*time.Millisecond, "each job should lead on exactly one instance")
	require.Never(t, func() bool { return !eachOnOne() }, time.Second, 20*time.Millisecond,
		"each job should keep leading on exactly one instance\na:\n%s\nb:\n%s", a.rec, b.rec)

	rows := statusTable(t, store...)
	require.Len(t, rows, len(leases), "status should list the three jobs")
	tokens := map[string]uint64{}
	for i, job := range leases {
		row := rows[i]
		require.Len(t, row, 6, "status row %q", row)
		assert.Equal(t, job, row[0])
		leader, follower := a, b
		if b.rec.leads(job) == 1 {
			leader, follower = b, a
		}
		assert.Equal(t, map[*instance]string{a: "instance-a", b: "instance-b"}[leader], row[1], "holder of %s", job)
		assert.Regexp(t, `^[\d.]+m?s ago$`, row[4], "%s should have been renewed", job)
		assert.Regexp(t, `^in \d`, row[5], "%s should be held", job)
		token, err := strconv.ParseUint(row[2], 10, 64)
		require.NoError(t, err)
		tokens[job] = token
		// The leader logs its passes with its token; the follower none.
		passes := leader.rec.passTokens(job)
		require.NotEmpty(t, passes, "the leader of %s should log its passes\n%s", job, leader.rec)
		assert.Equal(t, token, passes[len(passes)-1], "the pass lines of %s should carry the leader's token", job)
		assert.Empty(t, follower.rec.passTokens(job), "the follower of %s logged a pass", job)
	}
	// status -json and /leases on either instance list the same holders and
	// tokens, in the same JSON.
	terms := func(ls []statuspage.Lease) map[string]string {
		m := map[string]string{}
		for _, l := range ls {
			m[l.Name] = fmt.Sprintf("%s %d", l.Holder, l.Token)
		}
		return m
	}
	want := map[string]string{}
	for _, row := range rows {
		want[row[0]] = row[1] + " " + row[2]
	}
	assert.Equal(t, want, terms(statusJSON(t, store...)), "status -json")
	for _, in := range []*instance{a, b} {
		page := leasesOf(t, in)
		assert.Equal(t, want, terms(page.Leases), "/leases")
		require.Len(t, page.Jobs, len(leases), "/leases jobs")
		for _, j := range page.Jobs {
			assert.Equal(t, in.rec.leads(j.Lease) == 1, j.Leading, "/leases: leading %s", j.Lease)
		}
	}
	if o := opts("test"); o.referenceJobs() {
		db := demoDB(t, o)
		require.Eventually(t, func() bool { return expiredAirdrops(t, db) > 0 }, 5*time.Second, 20*time.Millisecond,
			"the airdrop-expiry leader should expire the demo airdrops")
	}

	// Stop a: its jobs move to b within a second, and b leads all three
	// and logs their passes, with tokens larger than a's.
	a.stopAndWait(t)
	for _, job := range leases {
		assert.Zero(t, a.rec.leads(job), "a stopped but still leads %s", job)
	}
	require.Eventually(t, func() bool {
		for _, job := range leases {
			if b.rec.leads(job) != 1 {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond, "b should lead every job within 1 s of a's stop\nb:\n%s", b.rec)
	for _, row := range statusTable(t, store...) {
		assert.Equal(t, "instance-b", row[1], "status row %q", row)
	}
	for _, job := range leases {
		require.Eventually(t, func() bool {
			p := b.rec.passTokens(job)
			return len(p) > 0 && p[len(p)-1] > tokens[job]
		}, 5*time.Second, 10*time.Millisecond, "b should log the passes of %s with a larger token\nb:\n%s", job, b.rec)
	}

	b.stopAndWait(t)
	for _, row := range statusTable(t, store...) {
		assert.Equal(t, "free", row[5], "after both stopped, status row %q", row)
	}
	assert.Empty(t, a.rec.warns(), "a warned")
	assert.Empty(t, b.rec.warns(), "b warned")
}

// TestHTTPSourcesAndWebhooks runs one daemon with -price-url and
// -webhook-url on test servers: it reads prices from the URL, and the
// webhooks it enqueues arrive, signed with -secret.
func TestHTTPSourcesAndWebhooks(t *testing.T) {
	var priceGets, hooks, badSignatures atomic.Int64
	prices := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		priceGets.Add(1)
		fmt.Fprint(w, `{"ACME": 42.5}`)
	}))
	defer prices.Close()
	o := fastOptions(tempDB(t), "solo")
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !validSignature([]byte(o.secret), body, r.Header.Get("X-Signature")) {
			badSignatures.Add(1)
		}
		hooks.Add(1)
	}))
	defer hookSrv.Close()
	o.priceURL, o.webhookURL = prices.URL, hookSrv.URL

	in := startInstance(t, o)
	require.Eventually(t, func() bool { return priceGets.Load() > 0 && hooks.Load() > 0 }, 5*time.Second, 10*time.Millisecond,
		"the daemon should fetch prices and deliver a webhook\n%s", in.rec)
	in.stopAndWait(t)
	assert.Zero(t, badSignatures.Load(), "webhooks with a bad signature")
	assert.Contains(t, in.rec.String(), "ACME=42.5")
	assert.Empty(t, in.rec.warns())
	http.DefaultClient.CloseIdleConnections()
}

// TestFlagsRefuse checks that bad flags exit with code 2 and a message
// naming the bad value, before anything is opened.
func TestFlagsRefuse(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"TTL not above renew":    {[]string{"-ttl", "1s", "-renew", "1s"}, "-ttl 1s, -renew 1s"},
		"renew leaves no room":   {[]string{"-ttl", "3s", "-renew", "1500ms"}, "RenewInterval 1.5s"},
		"negative retry":         {[]string{"-retry", "-1s"}, "-retry -1s"},
		"not a duration":         {[]string{"-ttl", "soon"}, `"soon"`},
		"zero interval":          {[]string{"-interval", "0s"}, "-interval 0s"},
		"price URL scheme":       {[]string{"-price-url", "ftp://prices.example"}, `-price-url "ftp://prices.example"`},
		"relative price URL":     {[]string{"-price-url", "/prices"}, `-price-url "/prices"`},
		"webhook URL no scheme":  {[]string{"-webhook-url", "localhost:9000/hook"}, `"localhost:9000/hook"`},
		"empty holder":           {[]string{"-holder", ""}, "-holder"},
		"holder with line break": {[]string{"-holder", "a\nb"}, `"a\nb"`},
		"empty db":               {[]string{"-db", ""}, "-db is empty"},
		"empty secret":           {[]string{"-secret", ""}, "-secret is empty"},
		"unknown flag":           {[]string{"-bogus"}, "-bogus"},
		"argument":               {[]string{"stats"}, `"stats"`},
		"status argument":        {[]string{"status", "now"}, `"now"`},
		"db and pg":              {[]string{"-db", "x.db", "-pg", "postgres://db/app"}, "give -db (SQLite) or -pg (PostgreSQL), not both"},
		"status db and pg":       {[]string{"status", "-db", "x.db", "-pg", "postgres://db/app"}, "not both"},
		"db and etcd":            {[]string{"-db", "x.db", "-etcd", "127.0.0.1:2379"}, "give -db (SQLite) or -etcd, not both"},
		"three stores":           {[]string{"-pg", "postgres://db/app", "-etcd", "e:2379", "-mysql", "u@tcp(db)/app"}, "give one store of -pg (PostgreSQL), -etcd, -mysql (MySQL)"},
		"status etcd and mysql":  {[]string{"status", "-etcd", "e:2379", "-mysql", "u@tcp(db)/app"}, "give -etcd or -mysql (MySQL), not both"},
		"empty pg":               {[]string{"-pg", ""}, "-pg is empty"},
		"empty mysql":            {[]string{"-mysql", ""}, "-mysql is empty"},
		"status empty etcd":      {[]string{"status", "-etcd", ""}, "-etcd is empty"},
		"etcd without endpoint":  {[]string{"-etcd", " , "}, `-etcd " , " names no endpoint`},
		"price URL on etcd":      {[]string{"-etcd", "e:2379", "-price-url", "http://prices.example"}, "-price-url needs the reference jobs"},
		"webhook URL on mysql":   {[]string{"-mysql", "u@tcp(db)/app", "-webhook-url", "http://hooks.example"}, "-webhook-url needs the reference jobs"},
		"http without port":      {[]string{"-http", "8080"}, `-http "8080"`},
		"status json value":      {[]string{"status", "-json=maybe"}, "-json"},
		"k8s and pg":             {[]string{"-pg", "postgres://db/app", "-k8s", "default"}, "give -pg (PostgreSQL) or -k8s (Kubernetes), not both"},
		"empty k8s":              {[]string{"-k8s", ""}, "-k8s is empty"},
		"kubeconfig without k8s": {[]string{"-kubeconfig", "kc"}, `-kubeconfig "kc" is for -k8s`},
		"price URL on k8s":       {[]string{"-k8s", "default", "-price-url", "http://prices.example"}, "-price-url needs the reference jobs"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var stderr, stdout strings.Builder
			code := run(context.Background(), tc.args, &stderr, &stdout)
			assert.Equal(t, 2, code, "exit code; stderr:\n%s", stderr.String())
			assert.Contains(t, stderr.String(), tc.want)
			assert.NoFileExists(t, defaultDB, "a bad flag must not open the file")
			assert.NoFileExists(t, "x.db", "a bad flag must not open the file")
		})
	}
}

func TestFlagDefaults(t *testing.T) {
	o, err := parseFlags(nil, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "leaderaware.db", o.db)
	assert.Equal(t, 3*time.Second, o.ttl)
	assert.Equal(t, time.Second, o.renew)
	assert.Equal(t, time.Second, o.retry)
	assert.Equal(t, defaultHolder(), o.holder)
	assert.Regexp(t, `^.+-\d+$`, o.holder, "host-pid")
	assert.Empty(t, o.priceURL)
	assert.Empty(t, o.webhookURL)
	assert.Empty(t, o.pg)
	assert.Empty(t, o.etcd)
	assert.Empty(t, o.mysql)
	assert.Empty(t, o.http, "no HTTP server unless asked for")
	assert.Equal(t, storeSQLite, o.store())

	o, err = parseFlags([]string{"-etcd", "e1:2379, https://e2:2379,", "-http", ":8080"}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"e1:2379", "https://e2:2379"}, o.etcd)
	assert.Equal(t, storeEtcd, o.store())
	assert.False(t, o.referenceJobs())
	assert.Equal(t, ":8080", o.http)
}

// TestHelp: -h, -help and --help, of leaderd and of leaderd status, print
// the usage to stdout and exit 0; it explains every column of the status
// table. A bad flag prints the usage to stderr instead.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"status", "-h"}, {"status", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stderr, stdout strings.Builder
			assert.Zero(t, run(context.Background(), args, &stderr, &stdout), "exit code")
			assert.Empty(t, stderr.String(), "help asked for goes to stdout")
			for _, want := range []string{
				"leaderd status", "-db", "-pg", "-etcd", "-mysql", "-k8s", "-json",
				"JOB ", "HOLDER ", "TOKEN ", "VERSION ", "RENEWED ", "EXPIRES ",
				"fencing token", `"free"`, "for display only",
			} {
				assert.Contains(t, stdout.String(), want)
			}
		})
	}
	var stderr, stdout strings.Builder
	assert.Zero(t, run(context.Background(), []string{"-h"}, &stderr, &stdout))
	for _, want := range []string{"-http", "/metrics", "/healthz", "/readyz", "on -etcd,\n-mysql and -k8s each of the three leases runs a simpler job"} {
		assert.Contains(t, stdout.String(), want, "leaderd -h")
	}
	stderr.Reset()
	stdout.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-bogus"}, &stderr, &stdout))
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), "Usage: leaderd")
}

// TestStartFailureIsOneLine: when the app cannot start, leaderd prints the
// cause alone, in one line, not the fx dependency graph around it.
func TestStartFailureIsOneLine(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "leases.db")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"bad -db":    {[]string{"-db", missing}, "fxmodule: lease store"},
		"bad -pg":    {[]string{"-pg", "postgres://app:secret@127.0.0.1:1/app?connect_timeout=2"}, "fxmodule: lease store"},
		"bad -etcd":  {[]string{"-etcd", "127.0.0.1:1"}, "leaderd: lease store: etcdlease"},
		"bad -mysql": {[]string{"-mysql", "app:secret@tcp(127.0.0.1:1)/app"}, "leaderd: lease store: mysqllease"},
		"busy -http": {[]string{"-db", filepath.Join(t.TempDir(), "leases.db"), "-http", busy.Addr().String()}, "leaderd: -http: listen tcp " + busy.Addr().String()},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr, stdout strings.Builder
			assert.Equal(t, 1, run(context.Background(), tc.args, &stderr, &stdout))
			// Info lines of what opened before the failure may come first;
			// the failure itself is one line.
			var out string
			for _, line := range strings.SplitAfter(stderr.String(), "\n") {
				if !strings.Contains(line, "level=INFO") {
					out += line
				}
			}
			assert.Equal(t, 1, strings.Count(out, "\n"), "one line:\n%s", stderr.String())
			assert.Less(t, len(out), 600, "the cause alone:\n%s", out)
			assert.Contains(t, out, tc.want)
			assert.NotContains(t, out, "could not build", "fx's graph")
			assert.NotContains(t, out, "secret", "the password")
		})
	}
	assert.NoFileExists(t, missing)
}

// TestStatusMissingFile checks that status names a missing file and does
// not create it.
func TestStatusMissingFile(t *testing.T) {
	db := tempDB(t)
	var stderr strings.Builder
	assert.Equal(t, 1, run(context.Background(), []string{"status", "-db", db}, &stderr, io.Discard))
	assert.Contains(t, stderr.String(), db)
	assert.NoFileExists(t, db)
}

func TestPrintLeases(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out strings.Builder
	require.NoError(t, printLeases(&out, []leaseRow{
		{Lease: elector.Lease{Name: "airdrop-expiry", Holder: "host-1", Token: 7, Version: 42, TTL: 3 * time.Second, Written: now.Add(-655 * time.Millisecond)}},
		{Lease: elector.Lease{Name: "price-refresh", Holder: "host-22", Token: 12, Version: 30, TTL: 3 * time.Second, Written: now.Add(-4 * time.Second)}},
		{Lease: elector.Lease{Name: "webhook-retry", Holder: "host-1", Token: 3, Version: 9, TTL: 3 * time.Second, Written: now.Add(-time.Minute)}, Released: true},
		// The writer's clock runs ahead of this one.
		{Lease: elector.Lease{Name: "x-skewed", Holder: "host-3", Token: 1, Version: 1, TTL: time.Second, Written: now.Add(time.Second)}},
	}, now))
	assert.Equal(t, ""+
		"JOB             HOLDER   TOKEN  VERSION  RENEWED    EXPIRES\n"+
		"airdrop-expiry  host-1   7      42       700ms ago  in 2.3s\n"+
		"price-refresh   host-22  12     30       4s ago     1s ago\n"+
		"webhook-retry   host-1   3      9        -          free\n"+
		"x-skewed        host-3   1      1        0s ago     in 2s\n", out.String())

	out.Reset()
	require.NoError(t, printLeases(&out, nil, now))
	assert.Contains(t, out.String(), "no leases")

	// etcd and MySQL tell nothing of a free lease.
	out.Reset()
	require.NoError(t, printLeases(&out, []leaseRow{{Lease: elector.Lease{Name: "price-refresh"}, Released: true}}, now))
	assert.Equal(t, ""+
		"JOB            HOLDER  TOKEN  VERSION  RENEWED  EXPIRES\n"+
		"price-refresh  -       -      -        -        free\n", out.String())
}

// TestPrintJSON: status -json lists the leases as the status page's JSON
// does: snake_case keys, tokens as strings, the TTL as a string and in
// seconds, a released lease free with its name only, absent times left out.
func TestPrintJSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out strings.Builder
	require.NoError(t, printJSON(&out, []leaseRow{
		{Lease: elector.Lease{Name: "airdrop-expiry", Holder: "host-1", Token: 7, Version: 42, TTL: 3 * time.Second, Written: now.Add(-655 * time.Millisecond)}},
		{Lease: elector.Lease{Name: "stale", Holder: "host-2", Token: 5, Version: 8, TTL: 1500 * time.Millisecond, Written: now.Add(-time.Minute)}},
		{Lease: elector.Lease{Name: "webhook-retry", Holder: "host-1", Token: 3, Version: 9, TTL: 3 * time.Second, Written: now.Add(-time.Minute)}, Released: true},
		{Lease: elector.Lease{Name: "price-refresh"}, Released: true},
	}, nil, now))
	assert.JSONEq(t, `{"now": "2026-01-02T03:04:05Z", "members": [], "leases": [
		{"name": "airdrop-expiry", "free": false, "holder": "host-1", "token": "7", "version": "42", "ttl": "3s", "ttl_seconds": 3,
		 "renewed": "2026-01-02T03:04:04.345Z", "expires": "2026-01-02T03:04:07.345Z"},
		{"name": "stale", "free": false, "holder": "host-2", "token": "5", "version": "8", "ttl": "1.5s", "ttl_seconds": 1.5,
		 "renewed": "2026-01-02T03:03:05Z", "expires": "2026-01-02T03:03:06.5Z", "expired": true},
		{"name": "webhook-retry", "free": true},
		{"name": "price-refresh", "free": true}
	]}`, out.String())
}

// TestPrintMembers: status lists the members whose seats are held and not
// expired, with the jobs each leads and those it waits for (every job
// another member leads, and the free ones), and -json gives each lease the
// members that wait for it.
func TestPrintMembers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seat := func(i int, holder string, written time.Time) leaseRow {
		return leaseRow{Lease: elector.Lease{Name: fmt.Sprintf("%sfx-1/seat/%d", placement.SeatPrefix, i), Holder: holder,
			Token: 1, Version: 1, TTL: 3 * time.Second, Written: written}}
	}
	rows := []leaseRow{
		{Lease: elector.Lease{Name: "airdrop-expiry", Holder: "a", Token: 7, Version: 42, TTL: 3 * time.Second, Written: now}},
		{Lease: elector.Lease{Name: "price-refresh", Holder: "b", Token: 3, Version: 9, TTL: 3 * time.Second, Written: now}},
		{Lease: elector.Lease{Name: "webhook-retry", Holder: "a", Token: 3, Version: 9, TTL: 3 * time.Second, Written: now}, Released: true},
		seat(0, fmt.Sprintf("a@%d", now.Add(-time.Minute).UnixMilli()), now),
		seat(1, fmt.Sprintf("b@%d", now.Add(-10*time.Second).UnixMilli()), now),
		seat(2, "dead@1", now.Add(-time.Minute)), // expired: no member
	}
	leases, members := splitSeats(rows, now)
	require.Len(t, leases, 3)
	var out strings.Builder
	require.NoError(t, printMembers(&out, leases, members, now))
	assert.Equal(t, ""+
		"MEMBER  GROUP  SINCE     LEADS           WAITS FOR\n"+
		"a       fx-1   1m0s ago  airdrop-expiry  price-refresh,webhook-retry\n"+
		"b       fx-1   10s ago   price-refresh   airdrop-expiry,webhook-retry\n", out.String())

	out.Reset()
	require.NoError(t, printJSON(&out, leases, members, now))
	var v struct {
		Leases  []statuspage.Lease
		Members []statuspage.Member
	}
	require.NoError(t, json.Unmarshal([]byte(out.String()), &v), out.String())
	require.Len(t, v.Members, 2)
	assert.Equal(t, []string{"airdrop-expiry"}, v.Members[0].Leases)
	assert.Equal(t, "fx-1", v.Members[0].Group)
	assert.Equal(t, []statuspage.Candidate{{Holder: "b"}}, v.Leases[0].Waiting)
	assert.Equal(t, []statuspage.Candidate{{Holder: "a"}, {Holder: "b"}}, v.Leases[2].Waiting, "a free lease: every member")
}
