//go:build linux

package mysqllease

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// The multi-process tests run this test binary as their child processes
// (see TestMain): replicas ("leader", leaderMain) on the test's database.
func init() { runChild = childMain }

func childMain(kind string, args []string) int {
	err := fmt.Errorf("unknown child %q", kind)
	if kind == "leader" {
		err = leaderMain(args)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", kind, err)
		return 1
	}
	return 0
}

// leaderMain runs one replica (see replica) on a Store of its own on the
// lease table -table of the database -dsn. Its fenced writes insert a row
// (seq, token, holder, n, at_us) into <table>_rows, where seq is the one
// counter of <table>_seq, incremented in the same transaction: its row lock
// serializes the writes until they commit or roll back, so seq follows
// commit order whatever the fence does.
func leaderMain(args []string) error {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "DSN of the database")
	table := fs.String("table", "", "lease table")
	r := replicaFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	store, err := Open(context.Background(), *dsn, WithTable(*table))
	if err != nil {
		return err
	}
	defer store.Close()
	rows, seq := quote(*table+"_rows"), quote(*table+"_seq")
	write := func(ctx context.Context, l elector.Lease, n int64) error {
		return store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE "+seq+" SET n = LAST_INSERT_ID(n + 1)"); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO "+rows+" (seq, token, holder, n, at_us) VALUES (LAST_INSERT_ID(), ?, ?, ?, ?)",
				l.Token, l.Holder, n, time.Now().UnixMicro())
			return err
		})
	}
	return r.run(store, write, sig)
}

// TestFailoverProcesses runs four replicas as processes, each with a Store
// of its own on the test's lease table, and checks the failover bounds of
// the lease model with a crashed, a frozen and a gracefully stopped leader
// (see runFailover).
func TestFailoverProcesses(t *testing.T) {
	table := freshTable(t)
	reader := openStore(t, table) // creates the table
	c := newCluster(t, append([]string{"-dsn", testDSN(t), "-table", table}, procTimings()...)...)
	runFailover(t, c, func(ctx context.Context) (elector.Lease, error) { return reader.Get(ctx, "job") })
}

// TestChaosProcesses runs the chaos schedule (see runChaos) on replicas
// with Stores of their own on the test's lease table; the leaders' fenced
// writes insert rows numbered in commit order (see leaderMain). A leader
// paused inside a fenced write holds its share lock on the lease row,
// which keeps candidates from taking over until the server ends its
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
	c := newCluster(t, append([]string{"-dsn", testDSN(t), "-table", table, "-every", chaosEvery.String()}, procTimings()...)...)
	read := func(ctx context.Context) ([]row, error) {
		rs, err := s.DB().QueryContext(ctx, "SELECT seq, token, holder, n, at_us FROM "+rows+" ORDER BY seq")
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var all []row
		for rs.Next() {
			var (
				r  row
				us int64
			)
			if err := rs.Scan(&r.order, &r.token, &r.holder, &r.n, &us); err != nil {
				return nil, err
			}
			r.at = time.UnixMicro(us)
			all = append(all, r)
		}
		return all, rs.Err()
	}
	runChaos(t, c, read, true)
}
