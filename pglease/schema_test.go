package pglease

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/pgsql"
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
	l, err := s1.TryAcquire(testCtx(t), "kept", "a", time.Minute, elector.Lease{})
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
	st, err := s.tableState(context.Background(), s.leases)
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, st.version)
}

// TestOpenRefusesMissingLeaseTable proves that Open refuses, with an error
// that says so, a lease table that was dropped while its version record
// stayed (before, Open succeeded and every operation failed forever).
func TestOpenRefusesMissingLeaseTable(t *testing.T) {
	schema := freshSchema(t)
	s := openStore(t, WithSchema(schema))
	require.NoError(t, s.Close())
	_, err := rawConn(t).Exec(testCtx(t), "DROP TABLE "+s.Table())
	require.NoError(t, err)
	_, err = Open(testCtx(t), testDSN(t), WithSchema(schema))
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), s.Table())
	assert.Contains(t, err.Error(), "missing")
}

// TestMigrateFromVersion1 proves the migration of a table that a pglease of
// schema version 1 made: its rows keep their holder and token, become
// version 1 with the TTL they were last given, and stay held (no clock
// decides that they ran out), so a candidate takes one over only with the
// lease it observed.
func TestMigrateFromVersion1(t *testing.T) {
	schema := freshSchema(t)
	s := openMigrated(t, schema, 1, true, `
		('live', 'a', 7, now() + interval '15 s', now() - interval '1 h', now()),
		('gone', 'b', 3, now() - interval '1 h', now() - interval '2 h', now() - interval '1 h 15 s')`)

	for _, want := range []elector.Lease{
		{Name: "live", Holder: "a", Token: 7, Version: 1, TTL: 15 * time.Second},
		{Name: "gone", Holder: "b", Token: 3, Version: 1, TTL: 15 * time.Second},
	} {
		got, err := s.Get(testCtx(t), want.Name)
		require.NoError(t, err, "a migrated lease stays held")
		assert.Equal(t, want.Holder, got.Holder)
		assert.Equal(t, want.Token, got.Token)
		assert.Equal(t, want.Version, got.Version)
		assert.Equal(t, want.TTL, got.TTL)
		assert.False(t, got.Written.IsZero())

		_, err = s.TryAcquire(testCtx(t), want.Name, "c", time.Minute, elector.Lease{})
		require.ErrorIs(t, err, elector.ErrHeld)
		l, err := s.TryAcquire(testCtx(t), want.Name, "c", time.Minute, got)
		require.NoError(t, err, "a candidate that watched the migrated lease takes it over")
		assert.Greater(t, l.Token, want.Token)
	}
}

// TestMigrateFromVersion2 proves that the migration to the token mark
// starts it at the largest token of the existing rows, so that a token
// issued after they are lost still exceeds theirs; also when the version
// record was lost, where Open cannot tell a version 2 table from a version 3
// one by its columns.
func TestMigrateFromVersion2(t *testing.T) {
	for _, record := range []bool{true, false} {
		t.Run(fmt.Sprintf("record=%v", record), func(t *testing.T) {
			ahead := time.Now().Add(time.Hour).UnixMicro()
			s := openMigrated(t, freshSchema(t), 2, record, fmt.Sprintf("('ahead', 'a', %d, 1, 15000000, true, now())", ahead))
			_, err := rawConn(t).Exec(testCtx(t), "TRUNCATE "+s.Table())
			require.NoError(t, err)
			l, err := s.TryAcquire(testCtx(t), "ahead", "b", time.Minute, elector.Lease{})
			require.NoError(t, err)
			assert.Greater(t, l.Token, uint64(ahead), "a token issued after the migrated rows were lost went back")
		})
	}
}

// openMigrated makes the tables of schema version v in schema, with rows
// (the VALUES of an INSERT) and, if record, v recorded; then it opens a
// Store on them and checks that Open recorded SchemaVersion.
func openMigrated(t *testing.T, schema string, v int, record bool, rows string) *Store {
	conn := rawConn(t)
	table := pgx.Identifier{schema, DefaultTable}.Sanitize()
	vt := pgx.Identifier{schema, DefaultTable + versionSuffix}.Sanitize()
	sqls := []string{
		"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + vt + " (singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), version integer NOT NULL)",
	}
	for i := range v {
		sqls = append(sqls, fmt.Sprintf(migrations[i], table, pgsql.TokenTable(table)))
	}
	sqls = append(sqls, "INSERT INTO "+table+" VALUES "+rows)
	if record {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO %s (version) VALUES (%d)", vt, v))
	}
	for _, sql := range sqls {
		_, err := conn.Exec(testCtx(t), sql)
		require.NoError(t, err, sql)
	}
	s := openStore(t, WithSchema(schema))
	var got int
	require.NoError(t, conn.QueryRow(testCtx(t), "SELECT version FROM "+vt).Scan(&got))
	assert.Equal(t, SchemaVersion, got)
	return s
}

// TestOpenRefusesForeignTable proves that Open refuses, before it changes
// anything, a table that is not a pglease lease table: an application's
// table with a version column, one without, and another store's version
// table. Before, the first two got a version record next to them (the
// first adopted as a lease table, every operation then failing), and the
// last was adopted.
func TestOpenRefusesForeignTable(t *testing.T) {
	schema := freshSchema(t)
	openStore(t, WithSchema(schema)) // its version table is leaderaware_leases_version
	conn := rawConn(t)
	for _, table := range []string{"orders", "events"} {
		cols := "id bigint PRIMARY KEY, version bigint NOT NULL, name text"
		if table == "events" {
			cols = "id bigint PRIMARY KEY, name text, token bigint"
		}
		_, err := conn.Exec(testCtx(t), "CREATE TABLE "+pgx.Identifier{schema, table}.Sanitize()+" ("+cols+")")
		require.NoError(t, err)
	}
	for _, table := range []string{"orders", "events", DefaultTable + versionSuffix} {
		_, err := Open(testCtx(t), testDSN(t), WithSchema(schema), WithTable(table))
		if assert.Error(t, err, "WithTable(%q)", table) {
			t.Log(err)
			assert.Contains(t, err.Error(), pgx.Identifier{schema, table}.Sanitize())
			assert.Contains(t, err.Error(), "not a pglease lease table")
			assert.Contains(t, err.Error(), "WithTable")
		}
		var made bool
		require.NoError(t, conn.QueryRow(testCtx(t), "SELECT to_regclass($1) IS NOT NULL",
			pgx.Identifier{schema, table + versionSuffix}.Sanitize()).Scan(&made))
		assert.False(t, made, "Open made a version table for %s", table)
	}
}

// TestLayoutsMatchMigrations proves that layouts, by which Open tells a
// lease table from another, lists exactly the columns each migration
// leaves: a migration added without its layout fails here.
func TestLayoutsMatchMigrations(t *testing.T) {
	require.Len(t, layouts, len(migrations)+1, "one layout per schema version")
	schema := freshSchema(t)
	conn := rawConn(t)
	table := pgx.Identifier{schema, "layouts"}.Sanitize()
	_, err := conn.Exec(testCtx(t), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	for v := 1; v <= SchemaVersion; v++ {
		_, err := conn.Exec(testCtx(t), fmt.Sprintf(migrations[v-1], table, pgsql.TokenTable(table)))
		require.NoError(t, err, "migration %d", v)
		var cols []string
		require.NoError(t, conn.QueryRow(testCtx(t), `SELECT ARRAY(SELECT attname::text FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum)`, table).Scan(&cols))
		assert.ElementsMatch(t, layouts[v], cols, "schema version %d", v)
	}
}
