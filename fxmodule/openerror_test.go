package fxmodule_test

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/fxmodule"
)

// pgAppErr returns the error of fx.New for an app with Module on PostgreSQL at
// dsn and one LeaderJob, replacing J in the graph or not.
func pgAppErr(t *testing.T, dsn string, replace bool) error {
	t.Helper()
	inner := newCountingJob(nil)
	opts := []fx.Option{quiet, fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(dsn)})}
	if replace {
		opts = append(opts, fx.Provide(func() testJob { return inner }), fxmodule.LeaderJob[testJob]("job"))
	} else {
		opts = append(opts, fx.Provide(func() *countingJob { return inner }), fxmodule.LeaderJob[*countingJob]("job"))
	}
	err := fx.New(opts...).Err()
	require.Error(t, err)
	assert.Zero(t, inner.starts.Load())
	return err
}

// TestPostgresUnknownDatabase: a DSN naming a database that does not exist
// is an error from fx.New that starts with what is wrong and what to do,
// not with fx's chain of constructors, in under 300 characters, and that
// still unwraps to the server's error.
func TestPostgresUnknownDatabase(t *testing.T) {
	u, err := url.Parse(pgDSN(t))
	require.NoError(t, err)
	u.Path = "/nope"
	for _, replace := range []bool{true, false} {
		err := pgAppErr(t, u.String(), replace)
		t.Logf("%d characters: %v", len(err.Error()), err)
		assert.Regexp(t, `^fxmodule.Postgres: database "nope" does not exist on [^ ]+:\d+; create it, or name an existing one in the DSN \(postgres://user@host:5432/db\)$`, err.Error())
		assert.Less(t, len(err.Error()), 300)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		assert.Equal(t, "3D000", pgErr.Code)
	}
}

// TestPostgresMalformedDSN: a DSN that cannot be parsed is an error from
// fx.New that starts with the form expected, and never shows the password.
func TestPostgresMalformedDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://app:secret@db:5432/app?sslmode=bogus", "host=db password=secret port=notaport"} {
		for _, replace := range []bool{true, false} {
			err := pgAppErr(t, dsn, replace)
			t.Logf("%d characters: %v", len(err.Error()), err)
			assert.Regexp(t, `^fxmodule.Postgres: the DSN cannot be parsed; give it as postgres://user@host:5432/db \(pglease: parse DSN: `, err.Error())
			assert.Less(t, len(err.Error()), 300)
			assert.NotContains(t, err.Error(), "secret")
		}
	}
}

// TestSQLiteOpenError: a SQLite file that cannot be opened is an error from
// fx.New that is the store's own, not fx's chain of constructors.
func TestSQLiteOpenError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "leases.db")
	inner := newCountingJob(nil)
	err := fx.New(quiet, fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path)}),
		fx.Provide(func() testJob { return inner }), fxmodule.LeaderJob[testJob]("job")).Err()
	require.Error(t, err)
	t.Logf("%d characters: %v", len(err.Error()), err)
	assert.Regexp(t, `^fxmodule: lease store: sqlitelease: `, err.Error())
	assert.Contains(t, err.Error(), path)
	assert.Zero(t, inner.starts.Load())
}
