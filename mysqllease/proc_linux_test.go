//go:build linux

package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// The multi-process tests run this test binary as their helper processes
// (see TestMain), in this package's helper mode replica (replicaMain), on
// the test's database.
func init() {
	helpers = map[string]func([]string) error{"replica": replicaMain}
}

// replicaMain runs one replica (see helperproc.Replica) on a Store of its
// own on the lease table -table of the database -dsn. Its fenced writes
// insert a row (seq, token, holder, n, at_us) into <table>_rows, where seq
// is the one counter of <table>_seq, incremented in the same transaction:
// its row lock serializes the writes until they commit or roll back, so
// seq follows commit order whatever the fence does.
func replicaMain(args []string) error {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "DSN of the database")
	table := fs.String("table", "", "lease table")
	r := helperproc.ReplicaFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := Open(context.Background(), *dsn, WithTable(*table))
	if err != nil {
		return err
	}
	defer store.Close()
	rows, seq := quote(*table+"_rows"), quote(*table+"_seq")
	return r.Run(store, func(ctx context.Context, l elector.Lease, n int64) error {
		return store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE "+seq+" SET n = LAST_INSERT_ID(n + 1)"); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO "+rows+" (seq, token, holder, n, at_us) VALUES (LAST_INSERT_ID(), ?, ?, ?, ?)",
				l.Token, l.Holder, n, time.Now().UnixMicro())
			return err
		})
	})
}

// TestFailoverProcesses runs four replicas as processes, each with a Store
// of its own on the test's lease table, and checks the failover bounds of
// the lease model with a crashed, a frozen and a gracefully stopped leader
// (see replicatest.Failover).
func TestFailoverProcesses(t *testing.T) {
	table := freshTable(t)
	reader := openStore(t, table) // creates the table
	replicatest.Failover(t, []string{"-dsn", testDSN(t), "-table", table}, reader)
}

// TestChaosProcesses runs the chaos schedule (see replicatest.Chaos) on
// replicas with Stores of their own on the test's lease table; the leaders'
// fenced writes insert rows numbered in commit order (see replicaMain). A
// leader paused inside a fenced write holds its share lock on the lease
// row, which keeps candidates from taking over until the server ends its
// connection (wait_timeout, the TTL rounded up to seconds) or it resumes:
// a pause longer than the TTL may lengthen a gap by its excess.
func TestChaosProcesses(t *testing.T) {
	table := freshTable(t)
	s := openStore(t, table)
	rows, seq := quote(table+"_rows"), quote(table+"_seq")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.DB().ExecContext(ctx, "DROP TABLE IF EXISTS "+rows+", "+seq); err != nil {
			t.Errorf("drop %s and %s: %v", rows, seq, err)
		}
	})
	for _, ddl := range []string{
		"CREATE TABLE " + seq + " (id TINYINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + seq + " VALUES (1, 0)",
		"CREATE TABLE " + rows + ` (seq BIGINT UNSIGNED PRIMARY KEY, token BIGINT UNSIGNED NOT NULL,
			holder VARBINARY(255) NOT NULL, n BIGINT NOT NULL, at_us BIGINT NOT NULL) ENGINE=InnoDB`,
	} {
		if _, err := s.DB().ExecContext(testCtx(t), ddl); err != nil {
			t.Fatal(err)
		}
	}
	read := func(ctx context.Context) ([]replicatest.Write, error) {
		rs, err := s.DB().QueryContext(ctx, "SELECT seq, token, holder, n, at_us FROM "+rows+" ORDER BY seq")
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var all []replicatest.Write
		for rs.Next() {
			var (
				w  replicatest.Write
				us int64
			)
			if err := rs.Scan(&w.Order, &w.Token, &w.Holder, &w.N, &us); err != nil {
				return nil, err
			}
			w.At = time.UnixMicro(us)
			all = append(all, w)
		}
		return all, rs.Err()
	}
	replicatest.Chaos(t, replicatest.ChaosStore{
		Args:            []string{"-dsn", testDSN(t), "-table", table},
		Read:            read,
		PauseHoldsLocks: true,
		Save:            saveLease(s),
	})
}

// saveLease saves the held row of helperproc.LeaseName in s's table and
// returns a function that writes it back (nil if it is free), as a
// failover to a replica that lagged would (see replicatest.ChaosStore).
func saveLease(s *Store) func(context.Context) (func(context.Context) (bool, error), error) {
	return func(ctx context.Context) (func(context.Context) (bool, error), error) {
		var (
			holder              string
			token, version, ttl uint64
		)
		err := s.DB().QueryRowContext(ctx, `SELECT holder, token, version, ttl_us FROM `+s.Table()+` WHERE name = ? AND NOT released`,
			helperproc.LeaseName).Scan(&holder, &token, &version, &ttl)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (bool, error) {
			n, err := affected(s.DB().ExecContext(ctx, `UPDATE `+s.Table()+` SET holder = ?, version = ?, ttl_us = ?, released = FALSE, token = ?
				WHERE name = ? AND (token = ? OR released)`, holder, version, ttl, token, helperproc.LeaseName, token))
			return n == 1, err
		}, nil
	}
}
