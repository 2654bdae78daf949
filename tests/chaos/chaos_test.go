//go:build linux

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// gapMargin is the slack of the gap bound (see bounds.base).
const gapMargin = time.Second

// TestChaosSQLite runs the chaos schedule on -chaos.procs processes sharing
// one SQLite file; the leaders write with sqlitelease's Store.Fenced.
func TestChaosSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chaos.db")
	const table = "chaos_writes"
	s, err := sqlitelease.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.DB().ExecContext(t.Context(), `CREATE TABLE `+table+` (
		seq    INTEGER PRIMARY KEY AUTOINCREMENT,
		token  INTEGER NOT NULL,
		holder TEXT    NOT NULL,
		at_us  INTEGER NOT NULL
	) STRICT`)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	runChaos(t, "sqlite", []string{"-db", path, "-table", table, "-name", "chaos-" + unique()}, func(ctx context.Context) ([]row, error) {
		s, err := sqlitelease.Open(path) // a fresh connection, after every process has exited
		if err != nil {
			return nil, err
		}
		defer s.Close()
		rs, err := s.DB().QueryContext(ctx, `SELECT seq, token, holder, at_us FROM `+table+` ORDER BY seq`)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var rows []row
		for rs.Next() {
			var (
				r  row
				us int64
			)
			if err := rs.Scan(&r.seq, &r.token, &r.holder, &us); err != nil {
				return nil, err
			}
			r.at = time.UnixMicro(us)
			rows = append(rows, r)
		}
		return rows, rs.Err()
	})
}

// TestChaosPostgres is TestChaosSQLite on PostgreSQL, in a schema of its own
// (the lease table and the rows table), dropped at the end; the leaders
// write with pglease's Store.Fenced and the rows carry the server's
// clock_timestamp().
func TestChaosPostgres(t *testing.T) {
	dsn := os.Getenv("LEADERAWARE_TEST_PG")
	if dsn == "" {
		t.Skip("set LEADERAWARE_TEST_PG=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the chaos test on PostgreSQL")
	}
	schema := "leaderaware_chaos_" + unique()
	table := pgx.Identifier{schema, "writes"}.Sanitize()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	s, err := pglease.Open(t.Context(), dsn, pglease.WithSchema(schema)) // creates the schema and the lease table
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(t.Context(), `CREATE TABLE `+table+` (
		seq    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		token  bigint      NOT NULL,
		holder text        NOT NULL,
		at     timestamptz NOT NULL DEFAULT clock_timestamp()
	)`)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	runChaos(t, "postgres", []string{"-pg", dsn, "-schema", schema, "-table", "writes", "-name", "chaos-" + unique()}, func(ctx context.Context) ([]row, error) {
		conn, err := pgx.Connect(ctx, dsn) // a fresh connection, after every process has exited
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rs, err := conn.Query(ctx, `SELECT seq, token, holder, at FROM `+table+` ORDER BY seq`)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var rows []row
		for rs.Next() {
			var (
				r     row
				token int64
			)
			if err := rs.Scan(&r.seq, &token, &r.holder, &r.at); err != nil {
				return nil, err
			}
			r.token = uint64(token)
			rows = append(rows, r)
		}
		return rows, rs.Err()
	})
}

// runChaos runs the chaos schedule with the store flags, then reads the rows
// with read and checks them.
func runChaos(t *testing.T, store string, storeArgs []string, read func(context.Context) ([]row, error)) {
	procs, d := *flagProcs, *flagDuration
	if procs < 3 {
		t.Fatalf("-chaos.procs=%d: need at least 3, so that a crashed or paused leader leaves 2 live candidates", procs)
	}
	seed := *flagSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("%s: %d processes for %v, seed %d (rerun with -chaos.seed=%d)", store, procs, d, seed, seed)
	b := bounds{ttl: timings.ttl, retry: timings.retry, writeEvery: timings.every, hold: *flagHold, margin: gapMargin}
	args := slices.Concat(storeArgs, []string{
		"-ttl", timings.ttl.String(), "-renew", timings.renew.String(),
		"-retry", timings.retry.String(), "-every", timings.every.String(), "-hold", flagHold.String()})

	began := time.Now()
	c := newCluster(t, procs, seed, args...)
	c.run(d)
	c.stopAll()
	elapsed := time.Since(began)

	for _, p := range c.all {
		out := p.stderr.String()
		switch {
		case strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:"):
			t.Errorf("%s stderr:\n%s", p.holder, out)
		case out != "":
			t.Logf("%s stderr:\n%s", p.holder, out)
		}
	}
	for i, l := range c.errLines {
		if i == 20 {
			t.Logf("... and %d more error lines", len(c.errLines)-i)
			break
		}
		t.Logf("error line: %s", l)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rows, err := read(ctx)
	if err != nil {
		t.Fatalf("read the rows: %v", err)
	}
	rep := check(rows, c.starts, c.pauses, b)
	for i, v := range rep.violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(rep.violations)-i)
			break
		}
		t.Error(v)
	}
	// OnDemoted runs after the term was resigned (its lease released if it
	// was still live), so a write with its token must never commit, unless
	// the resign itself failed (an ERROR line of that holder says so).
	for _, l := range c.zombieLines {
		holder := strings.Fields(l)[1]
		if !slices.ContainsFunc(c.errLines, func(e string) bool {
			return strings.HasPrefix(e, "ERROR "+holder+" ") && strings.Contains(e, "resign")
		}) {
			t.Errorf("a write with the token of an ended, resigned term committed: %s", l)
		}
	}
	if c.kills+len(c.pauses)+c.stops == 0 {
		t.Errorf("no chaos: nothing was killed, paused or stopped in %v", d)
	}
	if rep.terms < 2 {
		t.Errorf("%d terms wrote rows: no takeover was seen", rep.terms)
	}

	var longestPause time.Duration
	for _, p := range c.pauses {
		longestPause = max(longestPause, p.end.Sub(p.start))
	}
	var plain gap // the longest gap that no pause excuses
	for _, g := range rep.gaps {
		t.Logf("gap %v (bound %v) from token %d (%s) to token %d (%s)",
			g.length.Round(time.Millisecond), g.bound.Round(time.Millisecond), g.from.token, g.from.holder, g.to.token, g.to.holder)
		if !g.pauseExtends && g.length > plain.length {
			plain = g
		}
	}
	figures := fmt.Sprintf("chaos %s: %d procs, %v (seed %d): %d terms (%d wrote rows), %d kills, %d pauses (longest %v), "+
		"%d graceful stops, %d restarts, %d rows, %d refused fenced writes, %d refused zombie writes, %d error lines; "+
		"longest gap %v (bound %v), longest gap outside pauses %v (bound %v)",
		store, procs, elapsed.Round(100*time.Millisecond), seed, len(c.starts), rep.terms, c.kills, len(c.pauses),
		longestPause.Round(time.Millisecond), c.stops, c.restarts, rep.rows, c.refused, c.zombies, len(c.errLines),
		rep.longest.length.Round(time.Millisecond), rep.longest.bound.Round(time.Millisecond),
		plain.length.Round(time.Millisecond), b.base())
	t.Log(figures)
	fmt.Println(figures)
}

// unique returns a random suffix for names in a database that outlives the
// test.
func unique() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
