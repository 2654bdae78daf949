// Package replicatest runs replicas of an application on a real store, for
// the tests that the stores share (tests for SQLite and PostgreSQL,
// etcdlease, mysqllease): replicas as processes, crashed, frozen and
// stopped (Failover, Chaos), replicas of many leases balanced or not
// (Placement), and one replica as an fx app (FxWithStore). A store's
// tests supply only what differs: how its replica process opens the store
// and makes a fenced write, and how the test reads them back.
//
// The process tests, Linux only, run the test binary itself as their
// children, helpers in mode replica (see package helperproc): its TestMain
// calls helperproc.Main first.
package replicatest
