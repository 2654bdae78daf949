package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// sqliteInstances opens two Stores on one new file in b.TempDir(), as two
// processes would, and closes them when b ends.
func sqliteInstances(b *testing.B, file string) (*sqlitelease.Store, *sqlitelease.Store) {
	path := filepath.Join(b.TempDir(), file)
	open := func() *sqlitelease.Store {
		s, err := sqlitelease.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open()
}

// pgInstances opens two Stores on one fresh schema named prefix_<random>,
// as two processes would, and drops the schema and closes them when b
// ends. It skips b unless LEADERAWARE_TEST_PG is set.
func pgInstances(b *testing.B, prefix string) (*pglease.Store, *pglease.Store) {
	dsn := os.Getenv("LEADERAWARE_TEST_PG")
	if dsn == "" {
		b.Skip("set LEADERAWARE_TEST_PG=postgres://user@host:5432/db?sslmode=disable to run the PostgreSQL benchmarks")
	}
	ctx := context.Background()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := prefix + "_" + hex.EncodeToString(rnd[:])
	open := func() *pglease.Store {
		s, err := pglease.Open(ctx, dsn, pglease.WithSchema(schema))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	sa, sb := open(), open()
	b.Cleanup(func() { // runs before the Closes above
		if _, err := sa.Pool().Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			b.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return sa, sb
}
