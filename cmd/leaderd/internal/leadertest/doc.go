// Package leadertest runs the reference jobs "as leader" in tests, without
// an elector or the decorator: it acquires a lease in a real store (SQLite,
// and PostgreSQL when LEADERAWARE_TEST_PG names a server; see [Run]) and
// puts a term carrying that lease into a context, as the decorator would.
package leadertest
