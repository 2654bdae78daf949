//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/pglease"
)

// saveFunc saves the lease row as it is now, if it is held, and returns a
// function that writes it back and reports whether it did (nil if there
// was nothing to save), as a
// failover to a standby that lagged or a restore of a backup does: to an
// older version of the term it still has, or to an older term over a
// released row. Never over a newer term: a rollback that loses a live
// holder's takeover (an acknowledged write an asynchronous standby never
// got) lets a candidate that missed it take the lease while that holder
// still trusts its term, whatever the protocol; only fencing then keeps
// the data safe.
type saveFunc func(ctx context.Context) (restore func(context.Context) (bool, error), err error)

// Rollbacks: the schedule saves the lease row every 1–3 s and writes it
// back 0.6–1.5 s later (one to three renewals), while the processes run.
const (
	minRollbackAfter, maxRollbackAfter = 600 * time.Millisecond, 1500 * time.Millisecond
	minRollbackEvery, maxRollbackEvery = time.Second, 3 * time.Second
	// minRollbackTries is how many write-backs a run must have tried before
	// it must have landed one: a short run (20 s) may see every one miss.
	minRollbackTries = 20
)

// roller is the rollback fault of a run. The test goroutine owns it.
type roller struct {
	save    saveFunc
	restore func(context.Context) (bool, error) // the saved row; nil if none
	due     time.Time                           // of the next save, or of the restore
	errs    int
	tries   int // write-backs attempted
}

// rollDue saves the lease row or writes it back when that is due, and
// records each write-back in c.rollbacks. A write-back only lands if the
// term it saved still holds (or the row is released), so one that misses
// saves the row again at once.
func (c *cluster) rollDue() {
	r := c.roll
	if r == nil || time.Now().Before(r.due) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.restore == nil {
		restore, err := r.save(ctx)
		switch {
		case err != nil:
			r.errs++
			c.t.Logf("rollback: save the lease row: %v", err)
		case restore != nil:
			r.restore = restore
			r.due = time.Now().Add(c.randBetween(minRollbackAfter, maxRollbackAfter))
			return
		}
		r.due = time.Now().Add(c.randBetween(minRollbackEvery, maxRollbackEvery))
		return
	}
	at := time.Now() // before the write: the gap bound counts from here
	r.tries++
	wrote, err := r.restore(ctx)
	switch {
	case err != nil:
		r.errs++
		c.t.Logf("rollback: write the lease row back: %v", err)
	case wrote:
		c.mu.Lock()
		c.rollbacks = append(c.rollbacks, at)
		c.mu.Unlock()
	}
	r.restore = nil
	if !wrote {
		return // the term changed meanwhile (r.due has passed): save the row again at once
	}
	r.due = time.Now().Add(c.randBetween(minRollbackEvery, maxRollbackEvery))
}

// saveSQLite is the saveFunc of the lease name in the SQLite file at path:
// the whole row, its liveness record included, as a copy of the file has
// it. A row that is not there when it is written back (the file was
// deleted meanwhile) is left alone.
func saveSQLite(path, name string) saveFunc {
	return func(ctx context.Context) (func(context.Context) (bool, error), error) {
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		defer db.Close()
		var (
			holder                       string
			token, version, ttl, written int64
			liveFile                     sql.NullString
			liveOffset, liveVersion      sql.NullInt64
		)
		err = db.QueryRowContext(ctx, `SELECT holder, token, version, ttl_ms, written_at, live_file, live_offset, live_version
			FROM leaderaware_lease WHERE name = ? AND NOT released`, name).
			Scan(&holder, &token, &version, &ttl, &written, &liveFile, &liveOffset, &liveVersion)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (bool, error) {
			db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				return false, err
			}
			defer db.Close()
			return wroteRow(db.ExecContext(ctx, `UPDATE leaderaware_lease SET holder = ?1, token = ?2, version = ?3, ttl_ms = ?4, released = 0,
				written_at = ?5, live_file = ?6, live_offset = ?7, live_version = ?8 WHERE name = ?9 AND (token = ?2 OR released)`,
				holder, token, version, ttl, written, liveFile, liveOffset, liveVersion, name))
		}, nil
	}
}

// savePostgres is the saveFunc of the lease name in the lease table of
// schema.
func savePostgres(dsn, schema, name string) saveFunc {
	table := pgx.Identifier{schema, pglease.DefaultTable}.Sanitize()
	return func(ctx context.Context) (func(context.Context) (bool, error), error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var (
			holder                string
			token, version, ttlUS int64
			written               time.Time
		)
		err = conn.QueryRow(ctx, `SELECT holder, token, version, ttl_us, written_at FROM `+table+` WHERE name = $1 AND NOT released`, name).
			Scan(&holder, &token, &version, &ttlUS, &written)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (bool, error) {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return false, err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			tag, err := conn.Exec(ctx, `UPDATE `+table+` SET holder = $2, token = $3, version = $4, ttl_us = $5, released = false,
				written_at = $6 WHERE name = $1 AND (token = $3 OR released)`, name, holder, token, version, ttlUS, written)
			return err == nil && tag.RowsAffected() == 1, err
		}, nil
	}
}

// wroteRow reports whether an UPDATE wrote a row.
func wroteRow(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
