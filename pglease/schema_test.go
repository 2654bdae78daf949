package pglease

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenConcurrentFreshSchema proves that replicas starting together on a
// fresh database all open: the advisory transaction lock serializes the
// CREATE SCHEMA and CREATE TABLE that would otherwise race into unique
// violations.
func TestOpenConcurrentFreshSchema(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t)
	const n = 8
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		stores = make([]*Store, n)
		errs   = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(testCtx(t), dsn, WithSchema(schema))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if assert.NoError(t, errs[i], "Open %d", i) {
			require.NoError(t, stores[i].Close())
		}
	}
	var v int
	require.NoError(t, rawConn(t).QueryRow(testCtx(t),
		"SELECT version FROM "+pgx.Identifier{schema, DefaultTable + versionSuffix}.Sanitize()).Scan(&v))
	assert.Equal(t, SchemaVersion, v)
}

// TestOpenExistingSchema proves that opening an existing table is
// idempotent and leaves its leases alone.
func TestOpenExistingSchema(t *testing.T) {
	schema := freshSchema(t)
	s1 := openStore(t, WithSchema(schema), WithTable("leases"))
	l, err := s1.TryAcquire(testCtx(t), "kept", "a", time.Minute)
	require.NoError(t, err)
	s2 := openStore(t, WithSchema(schema), WithTable("leases"))
	got, err := s2.Get(testCtx(t), "kept")
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token)
	assert.Equal(t, `"`+schema+`"."leases"`, s2.Table())
}

// TestOpenRefusesNewerSchema proves that a table migrated by a newer pglease
// is refused with ErrSchemaTooNew, naming both versions, and left as it is.
func TestOpenRefusesNewerSchema(t *testing.T) {
	schema := freshSchema(t)
	s := openStore(t, WithSchema(schema))
	require.NoError(t, s.Close())
	conn := rawConn(t)
	vt := pgx.Identifier{schema, DefaultTable + versionSuffix}.Sanitize()
	newer := SchemaVersion + 1
	_, err := conn.Exec(testCtx(t), "UPDATE "+vt+" SET version = $1", newer)
	require.NoError(t, err)

	_, err = Open(testCtx(t), testDSN(t), WithSchema(schema))
	require.ErrorIs(t, err, ErrSchemaTooNew)
	assert.Contains(t, err.Error(), "version "+strconv.Itoa(newer))
	assert.Contains(t, err.Error(), strconv.Itoa(SchemaVersion))

	var v int
	require.NoError(t, conn.QueryRow(testCtx(t), "SELECT version FROM "+vt).Scan(&v))
	assert.Equal(t, newer, v, "a refused Open must not touch the version record")
}

// TestOpenEmptyVersionRecord proves that a version table without its row
// (as a crash between two DDL statements could not leave it, but a manual
// edit could) is repaired, not refused.
func TestOpenEmptyVersionRecord(t *testing.T) {
	schema := freshSchema(t)
	s := openStore(t, WithSchema(schema))
	require.NoError(t, s.Close())
	vt := pgx.Identifier{schema, DefaultTable + versionSuffix}.Sanitize()
	_, err := rawConn(t).Exec(testCtx(t), "DELETE FROM "+vt)
	require.NoError(t, err)
	s = openStore(t, WithSchema(schema))
	v, err := s.schemaVersion(context.Background(), s.pool)
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, v)
}
