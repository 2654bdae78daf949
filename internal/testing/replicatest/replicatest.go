// Package replicatest runs replicas of an application on a real store, for
// the tests that the stores share (tests for SQLite and PostgreSQL,
// etcdlease, mysqllease): replicas as processes, crashed, frozen and
// stopped (Failover, Chaos), and one replica as an fx app (FxWithStore). A store's
// tests supply only what differs: how its replica process opens the store
// and makes a fenced write, and how the test reads them back.
//
// The process tests, Linux only, run the test binary itself as their
// children: its TestMain calls RunChild first.
package replicatest

import (
	"fmt"
	"os"
)

// ChildEnv names the environment variable that makes a test binary one of
// its multi-process tests' children; its value names the child.
const ChildEnv = "LEADERAWARE_TEST_CHILD"

// ReplicaChild is the name of the child that Failover and Chaos start: a
// replica, which the store's child parses with ReplicaFlags and runs with
// Replica.Run.
const ReplicaChild = "replica"

// RunChild returns at once unless ChildEnv is set. Then this process is a
// child: RunChild runs children[kind] (kind being ChildEnv's value) with
// the command-line arguments and exits, 0 if it returned nil.
func RunChild(children map[string]func(args []string) error) {
	kind := os.Getenv(ChildEnv)
	if kind == "" {
		return
	}
	err := fmt.Errorf("unknown child %q", kind)
	if main, ok := children[kind]; ok {
		err = main(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", kind, err)
		os.Exit(1)
	}
	os.Exit(0)
}
