// Package leadertest runs the reference jobs "as leader" in tests, without
// an elector or the decorator: it acquires a lease in a real
// sqlitelease.Store and puts a term carrying that lease into a context, as
// the decorator would.
package leadertest
