// Package helperproc is the one helper process of the multi-process tests
// and benchmarks: the test binary itself, started again by Command in one
// of its modes. A test binary whose TestMain calls Main first runs, when
// started so, the mode its first argument names, with that mode's flags,
// and exits.
//
// The modes (each one's doc says its flags and what it prints):
//
//	replica    a decorated job making fenced writes, for replicatest's Failover and Chaos (Replica);
//	           with -leases, many, balanced or first-wins, for replicatest's Placement (runPlaced)
//	chaos      a decorated job for the chaos tests in tests/chaos, with clock steps and suspends (chaosMain);
//	           with -leases, balanced with others by a placement.Group (balance)
//	holder     one elector that leads and holds its term, for the crash benchmarks and tests (holderMain)
//	follower   many electors on one store, for BenchmarkFollowers (followerMain)
//	contender  raw store calls hammering one SQLite file, for BenchmarkSQLiteContention (contenderMain)
//
// A child inherits the test binary's build, so it runs with the race
// detector when the tests do.
package helperproc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// Env names the environment variable that makes a test binary a helper
// process (see Main).
const Env = "LEADERAWARE_TEST_CHILD"

// modes are the built-in modes, by name.
var modes = map[string]func(args []string) error{
	"replica":   replicaMain,
	"chaos":     chaosMain,
	"holder":    holderMain,
	"follower":  followerMain,
	"contender": contenderMain,
}

// Main returns at once unless Env is set. Then this process is a helper:
// Main runs the mode that os.Args[1] names, from extra (which adds modes,
// or replaces a built-in one, as a module with a store of its own replaces
// replica) or the built-in ones, with the arguments after it, and exits, 0
// if the mode returned nil.
func Main(extra map[string]func(args []string) error) {
	if os.Getenv(Env) == "" {
		return
	}
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	run, ok := extra[mode]
	if !ok {
		run, ok = modes[mode]
	}
	err := fmt.Errorf("unknown mode %q: want one of %s", mode, strings.Join(slices.Sorted(maps.Keys(modes)), ", "))
	if ok {
		err = run(os.Args[2:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "helperproc %s: %v\n", mode, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command returns the command that runs this test binary as a helper in
// mode, with args; its TestMain must call Main.
func Command(tb testing.TB, mode string, args ...string) *exec.Cmd {
	tb.Helper()
	return CommandContext(context.Background(), tb, mode, args...)
}

// CommandContext is Command, killed once ctx is done (as by
// exec.CommandContext).
func CommandContext(ctx context.Context, tb testing.TB, mode string, args ...string) *exec.Cmd {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{mode}, args...)...)
	cmd.Env = append(os.Environ(), Env+"=1")
	return cmd
}

// storeFlags choose the store of a mode: the SQLite file -db, or the
// PostgreSQL database -pg with its lease table in -schema.
type storeFlags struct{ db, pg, schema *string }

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		db:     fs.String("db", "", "SQLite file"),
		pg:     fs.String("pg", "", "PostgreSQL DSN (instead of -db)"),
		schema: fs.String("schema", pglease.DefaultSchema, "PostgreSQL schema of the lease table"),
	}
}

// openedStore is the store that storeFlags name: store is the concrete
// store (with its optional interfaces), which is sqlite or pg.
type openedStore struct {
	store  elector.Store
	sqlite *sqlitelease.Store
	pg     *pglease.Store
	close  func() error
}

// open opens the store the flags name, on clk (the system clock if nil);
// opts are those of a PostgreSQL store, besides its schema.
func (f storeFlags) open(clk clock.Clock, opts ...pglease.Option) (openedStore, error) {
	switch {
	case *f.pg != "":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := pglease.Open(ctx, *f.pg, append([]pglease.Option{pglease.WithSchema(*f.schema)}, opts...)...)
		if err != nil {
			return openedStore{}, err
		}
		o := openedStore{store: s, pg: s, close: s.Close}
		if clk != nil { // pglease reads no wall clock: only its elector reads clk
			o.store = struct {
				*pglease.Store
				clock.Carrier
			}{s, clock.Carry(clk)}
		}
		return o, nil
	case *f.db != "":
		var opts []sqlitelease.Option
		if clk != nil {
			opts = append(opts, sqlitelease.WithClock(clk))
		}
		s, err := sqlitelease.Open(*f.db, opts...)
		if err != nil {
			return openedStore{}, err
		}
		return openedStore{store: s, sqlite: s, close: s.Close}, nil
	default:
		return openedStore{}, errors.New("need -db or -pg")
	}
}

// lineWriter writes whole lines at once, so lines never interleave; if
// stamped, each after the wall clock in Unix nanoseconds.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	stamped bool
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stamped {
		format, args = "%d "+format, append([]any{time.Now().UnixNano()}, args...)
	}
	fmt.Fprintf(l.w, format+"\n", args...)
}

// oneLine returns err's message on one line.
func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " | ")
}
