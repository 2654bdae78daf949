//go:build linux

package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// gapMargin is the slack of the gap bound (see bounds.base).
const gapMargin = time.Second

// TestChaosSQLite runs the chaos schedule on -chaos.procs processes sharing
// one SQLite file; the leaders write with sqlitelease's Store.Fenced into a
// table of the lease file. Once per run the test deletes the file (with its
// -wal and -shm) under the running processes: each process's store then
// reports the file changed, and the process exits, as an application would
// crash on it; the schedule restarts it on the new file. The rows of the
// deleted file are copied first (see deleteSQLite), so the checks span the
// whole run. Twice per run it also moves a backup over the file, as a
// restore does (see restoreSQLite): the processes' stores follow the path
// to it and go on.
func TestChaosSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chaos.db")
	const table = "chaos_writes" // the chaos helper creates it in every new file
	inode, err := createSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	saved := path + ".backup" // of the file before the run: no lease rows
	if err := backupSQLite(t.Context(), path, saved); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, file int) ([]row, error) {
		s, err := sqlitelease.Open(path) // a fresh connection, after every process has exited
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return sqliteRows(ctx, s.DB(), table, file)
	}
	del := func(ctx context.Context, file int) ([]row, uint64, error) {
		return deleteSQLite(ctx, path, table, file)
	}
	name := "chaos-" + unique()
	restore := func(ctx context.Context, file int) ([]row, uint64, error) {
		return restoreSQLite(ctx, path, table, file, saved)
	}
	runChaos(t, "sqlite", inode, []string{"-db", path, "-table", table, "-name", name}, read, del, restore, saveSQLite(path, name))
}

// backupSQLite copies the database at path to a new file at to.
func backupSQLite(ctx context.Context, path, to string) error {
	s, err := sqlitelease.Open(path)
	if err != nil {
		return err
	}
	_ = os.Remove(to)
	_, err = s.DB().ExecContext(ctx, `VACUUM INTO ?`, to)
	return errors.Join(err, s.Close())
}

// restoreSQLite moves a copy of the backup saved over the file at path while
// the processes run, as a restore does (`mv restored.db app.db`, removing
// the replaced file's -wal and -shm in the same step), and saves a new
// backup, for the next restore, first. Like deleteSQLite, it keeps the
// replaced file's rows (see changeSQLite) and returns them with the
// restored file's inode; the rows of the backup are deleted from the copy
// it moves in, since the copied rows count them already. The backup's lease
// rows stay: the stores must neither take those leases over at once nor
// issue lower tokens.
func restoreSQLite(ctx context.Context, path, table string, file int, saved string) ([]row, uint64, error) {
	if err := backupSQLite(ctx, path, saved+".next"); err != nil {
		return nil, 0, err
	}
	restored := path + ".restored"
	b, err := os.ReadFile(saved)
	if err == nil {
		err = os.WriteFile(restored, b, 0o600)
	}
	if err == nil {
		err = emptyTable(ctx, restored, table)
	}
	if err != nil {
		return nil, 0, err
	}
	rows, err := changeSQLite(ctx, path, table, file, func() error {
		if err := os.Rename(restored, path); err != nil {
			return err
		}
		return removeFiles(path, "-wal", "-shm")
	})
	if err == nil {
		err = os.Rename(saved+".next", saved)
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	return rows, fi.Sys().(*syscall.Stat_t).Ino, nil
}

// emptyTable deletes the rows of table in the SQLite file at path, if it
// has that table.
func emptyTable(ctx context.Context, path, table string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	var n int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n)
	if err == nil && n > 0 {
		_, err = db.ExecContext(ctx, `DELETE FROM "`+table+`"`)
	}
	return errors.Join(err, db.Close())
}

// createSQLite creates the lease file at path and returns its inode.
func createSQLite(path string) (uint64, error) {
	s, err := sqlitelease.Open(path)
	if err != nil {
		return 0, err
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

// deleteSQLite copies the rows of the file at path and deletes it with its
// -wal and -shm files, as `rm app.db app.db-wal app.db-shm` would, while the
// processes run, under the file's write lock (see changeSQLite). Then it
// creates a new file
// at path (before any process is restarted, so that the processes' OPEN
// lines tell the files apart by inode) and returns the copied rows and the
// new file's inode.
func deleteSQLite(ctx context.Context, path, table string, file int) ([]row, uint64, error) {
	rows, err := changeSQLite(ctx, path, table, file, func() error { return removeFiles(path, "", "-wal", "-shm") })
	if err != nil {
		return nil, 0, err
	}
	inode, err := createSQLite(path)
	return rows, inode, err
}

// changeSQLite copies the rows of table in the file at path and runs change
// while it holds the file's write lock (BEGIN IMMEDIATE), from before the
// copy until after the change, so that no write commits to the file between
// the two, and a writer that gets the lock afterwards finds the file changed
// when its fenced write checks it.
func changeSQLite(ctx context.Context, path, table string, file int, change func() error) ([]row, error) {
	s, err := sqlitelease.Open(path)
	if err != nil {
		return nil, err
	}
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		s.Close()
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		conn.Close()
		s.Close()
		return nil, err
	}
	rows, err := sqliteRows(ctx, tx, table, file)
	if err == nil {
		err = change()
	}
	return rows, errors.Join(err, tx.Rollback(), conn.Close(), s.Close())
}

// removeFiles removes the files path+suffix that exist.
func removeFiles(path string, suffixes ...string) error {
	var errs []error
	for _, suffix := range suffixes {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sqliteRows reads the rows of table in seq order.
func sqliteRows(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, table string, file int) ([]row, error) {
	rs, err := q.QueryContext(ctx, `SELECT seq, token, holder, n, at_us FROM "`+table+`" ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []row
	for rs.Next() {
		var (
			r  = row{file: file}
			us int64
		)
		if err := rs.Scan(&r.seq, &r.token, &r.holder, &r.n, &us); err != nil {
			return nil, err
		}
		r.at = time.UnixMicro(us)
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// TestChaosPostgres is TestChaosSQLite on PostgreSQL, in a schema of its own
// (the lease table and the rows table), dropped at the end, without the
// deletion of a file; the leaders write with pglease's Store.Fenced and the
// rows carry the server's clock_timestamp(). The clock steps reach no
// PostgreSQL statement: the server's clock stamps written_at there.
func TestChaosPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "leaderaware_chaos_")
	table := pgx.Identifier{schema, "writes"}.Sanitize()
	s, err := pglease.Open(t.Context(), dsn, pglease.WithSchema(schema)) // creates the schema and the lease table
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(t.Context(), `CREATE TABLE `+table+` (
		seq    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		token  bigint      NOT NULL,
		holder text        NOT NULL,
		n      bigint      NOT NULL,
		at     timestamptz NOT NULL DEFAULT clock_timestamp()
	)`)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, file int) ([]row, error) {
		conn, err := pgx.Connect(ctx, dsn) // a fresh connection, after every process has exited
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rs, err := conn.Query(ctx, `SELECT seq, token, holder, n, at FROM `+table+` ORDER BY seq`)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var rows []row
		for rs.Next() {
			var (
				r     = row{file: file}
				token int64
			)
			if err := rs.Scan(&r.seq, &token, &r.holder, &r.n, &r.at); err != nil {
				return nil, err
			}
			r.token = uint64(token)
			rows = append(rows, r)
		}
		return rows, rs.Err()
	}
	name := "chaos-" + unique()
	runChaos(t, "postgres", 0, []string{"-pg", dsn, "-schema", schema, "-table", "writes", "-name", name}, read, nil, nil, savePostgres(dsn, schema, name))
}

// runChaos runs the chaos schedule with the store flags, then reads the rows
// of the last file with read, adds those of the files del deleted, and
// checks them. inode is the SQLite file's (0 on PostgreSQL); del and
// restore (which moves a backup over the file) are nil on PostgreSQL. save,
// if not nil, adds rollbacks of the lease row (see roller).
func runChaos(t *testing.T, store string, inode uint64, storeArgs []string,
	read func(ctx context.Context, file int) ([]row, error), del, restore deleteFunc, save saveFunc) {
	procs, d := *flagProcs, *flagDuration
	if procs < 3 {
		t.Fatalf("-chaos.procs=%d: need at least 3, so that a crashed or paused leader leaves 2 live candidates", procs)
	}
	seed := *flagSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	leases := *flagLeases
	if leases <= 0 {
		leases = 1
		if store == "postgres" {
			leases = 12
		}
	}
	t.Logf("%s: %d processes for %v, %d leases, seed %d (rerun with -chaos.seed=%d)", store, procs, d, leases, seed, seed)
	b := bounds{ttl: timings.ttl, retry: timings.retry, writeEvery: timings.every, hold: *flagHold, margin: gapMargin,
		perTerm: timings.ttl + timings.retry + 500*time.Millisecond, perDeletion: maxRestartDelay + 3*time.Second,
		resumeStop: time.Second}
	if leases > 1 {
		// A balanced candidate may hold back before it tries, at most a
		// RetryInterval (for a lease it has just yielded itself).
		b.placement = timings.retry
	}
	args := slices.Concat(storeArgs, []string{
		"-ttl", timings.ttl.String(), "-renew", timings.renew.String(),
		"-retry", timings.retry.String(), "-every", timings.every.String(), "-hold", flagHold.String(),
		"-suspend", timings.suspend.String(), "-stepby", flagStep.String(), "-leases", strconv.Itoa(leases)})

	began := time.Now()
	c := newCluster(t, procs, seed, inode, args...)
	if save != nil {
		c.roll = &roller{save: save, due: time.Now().Add(c.randBetween(minRollbackEvery, maxRollbackEvery))}
	}
	c.run(d, del, restore)
	c.stopAll()
	elapsed := time.Since(began)

	for _, p := range c.all {
		out := p.stderr.String()
		switch {
		case strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:"):
			t.Errorf("%s stderr:\n%s", p.holder, out)
		case out != "" && testing.Verbose():
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
	in := c.log()
	last, err := read(ctx, len(c.inodes)-1)
	if err != nil {
		t.Fatalf("read the rows: %v", err)
	}
	in.rows = append(slices.Clone(c.copied), last...)
	rep := check(in, b)
	others := c.otherLogs()
	otherViolations, otherExcused := checkOthers(others, b)
	rep.violations = append(rep.violations, otherViolations...)
	for i, v := range rep.violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(rep.violations)-i)
			break
		}
		t.Error(v)
	}
	// The lines around each overlap that nothing excuses, and around each
	// deletion when tokens went back, to show what happened.
	windows := 0
	for _, o := range rep.overlaps {
		if o.excuse == "" && windows < 3 {
			windows++
			t.Logf("the lines around the overlap of token %d (%s) and token %d (%s):\n%s", o.first.token, o.first.holder,
				o.second.token, o.second.holder, strings.Join(c.between(o.second.start.Add(-3*time.Second), o.second.start.Add(time.Second)), "\n"))
		}
	}
	if slices.ContainsFunc(rep.violations, func(v string) bool { return strings.Contains(v, "lowered") }) {
		for _, d := range c.deletions {
			t.Logf("the lines around the deletion of the file:\n%s", strings.Join(c.between(d.Add(-time.Second), d.Add(4*time.Second)), "\n"))
		}
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
	if c.steps > 0 && c.stepLines == 0 {
		t.Errorf("%d clock steps sent, none acknowledged (STEP lines)", c.steps)
	}
	if del != nil && len(c.deletions) == c.restores {
		t.Errorf("the SQLite file was never deleted")
	}
	if c.roll != nil {
		t.Logf("%s: %d rollbacks of the lease row in %d tries (%d failed saves or writes)", store, len(c.rollbacks), c.roll.tries, c.roll.errs)
		if len(c.rollbacks) == 0 && c.roll.tries >= minRollbackTries {
			t.Errorf("the lease row was never rolled back")
		}
	}
	if restore != nil && c.restores == 0 {
		t.Errorf("the SQLite file was never restored")
	}
	// A simulated suspend longer than the TTL closes the leader's trust
	// window by its own clock: the term ends at its next renewal timer.
	var slowestSuspend time.Duration
	writesAfterSuspend := 0
	for _, s := range c.suspends {
		writesAfterSuspend += s.writesAfter
		switch {
		case s.stopped == 0:
			t.Errorf("%s was suspended (simulated, %v) leading token %d and never stopped that term", s.holder, timings.suspend, s.token)
		case s.stopped > timings.renew+time.Second:
			t.Errorf("%s was suspended (simulated, %v) leading token %d and stopped that term only %v later",
				s.holder, timings.suspend, s.token, s.stopped)
		}
		slowestSuspend = max(slowestSuspend, s.stopped)
	}

	var longestPause time.Duration
	for _, p := range c.pauses {
		longestPause = max(longestPause, p.end.Sub(p.start))
	}
	var plain gap // the longest gap that nothing excuses
	for _, g := range rep.gaps {
		t.Logf("gap %v (bound %v%s) from token %d (%s) to token %d (%s)",
			g.length.Round(time.Millisecond), g.bound.Round(time.Millisecond), parens(g.why), g.from.token, g.from.holder, g.to.token, g.to.holder)
		if g.why == "" && g.length > plain.length {
			plain = g
		}
	}
	excused := 0
	var longestOverlap time.Duration
	for _, o := range rep.overlaps {
		if o.excuse != "" {
			excused++
			longestOverlap = max(longestOverlap, o.length)
			t.Logf("overlap of %v excused: token %d (%s) ran on while token %d (%s) started: %s",
				o.length.Round(time.Millisecond), o.first.token, o.first.holder, o.second.token, o.second.holder, o.excuse)
		}
	}
	figures := fmt.Sprintf("chaos %s: %d procs, %v (seed %d): %d terms (%d wrote rows), %d kills (%d bursts), %d pauses (longest %v), "+
		"%d simulated suspends (term ended %v after at the latest, %d writes meanwhile), %d clock steps (±%v, %d acknowledged), %d file deletions (%d processes exited on it), "+
		"%d restores of the file, %d graceful stops, %d restarts, %d rows, %d refused fenced writes, %d refused zombie writes, %d error lines; "+
		"%d violations, %d job overlaps excused by pauses or a rollback double fault (longest %v); longest gap %v (bound %v), longest gap nothing excuses %v (bound %v)",
		store, procs, elapsed.Round(100*time.Millisecond), seed, len(c.starts), rep.terms, c.kills, c.bursts, len(c.pauses),
		longestPause.Round(time.Millisecond), len(c.suspends), slowestSuspend.Round(time.Millisecond), writesAfterSuspend,
		c.steps, *flagStep, c.stepLines, len(c.deletions)-c.restores, c.goneLines, c.restores, c.stops, c.restarts, rep.rows, c.refused, c.zombies, len(c.errLines),
		len(rep.violations), excused, longestOverlap.Round(time.Millisecond),
		rep.longest.length.Round(time.Millisecond), rep.longest.bound.Round(time.Millisecond),
		plain.length.Round(time.Millisecond), b.base())
	if leases > 1 {
		n := moves(len(c.starts), others)
		figures += fmt.Sprintf("; balanced, %d leases in one placement.Group: %d yields asked by the group (%.1f/min), %d lease moves, all leases (%.1f/min), %d overlaps of the other leases excused by pauses",
			leases, c.yields, perMinute(c.yields, elapsed), n, perMinute(n, elapsed), otherExcused)
	}
	t.Log(figures)
	fmt.Println(figures)
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// unique returns a random suffix for names in a database that outlives the
// test.
func unique() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
