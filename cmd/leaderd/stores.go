package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/etcdlease"
	"github.com/leaderaware/leaderaware/mysqllease"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// openTimeout bounds opening a store: connecting, and creating its table.
const openTimeout = 30 * time.Second

// closingStore is a lease store that leaderd opened and must close.
type closingStore interface {
	elector.Store
	Close() error
}

// openStore opens the lease store that o names; a SQLite store logs to
// log. It does not create a missing SQLite file: leaderd itself opens
// SQLite and PostgreSQL through fxmodule.Module, and this is for status,
// and for etcd and MySQL, which the app gets with fxmodule.WithStore.
func openStore(ctx context.Context, o options, log *slog.Logger) (closingStore, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	switch o.store() {
	case storePostgres:
		return pglease.Open(ctx, o.pg, pgOptions(o.pg)...)
	case storeEtcd:
		return etcdlease.Open(ctx, o.etcd)
	case storeMySQL:
		return mysqllease.Open(ctx, o.mysql)
	case storeK8s:
		return openK8s(o)
	}
	if _, err := os.Stat(o.db); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no lease file %q (start leaderd first, or pass -db, -pg, -etcd or -mysql): %w", o.db, err)
	}
	return sqlitelease.Open(o.db, sqlitelease.WithLogger(log))
}

// target describes the store that o names, for logs and the status page:
// the file, the endpoints, or the user, address and database, never a
// password.
func (o options) target() string {
	switch o.store() {
	case storePostgres:
		cfg, err := pgconn.ParseConfig(o.pg)
		if err != nil {
			return "(a DSN that does not parse)"
		}
		return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	case storeEtcd:
		return strings.Join(o.etcd, ",")
	case storeMySQL:
		cfg, err := mysql.ParseDSN(o.mysql)
		if err != nil {
			return "(a DSN that does not parse)"
		}
		return fmt.Sprintf("%s@%s/%s", cfg.User, cfg.Addr, cfg.DBName)
	case storeK8s:
		return "namespace " + o.k8s
	}
	return o.db
}

// leaseRow is a lease as the status table and page show it:
// sqlitelease.LeaseRow and pglease.LeaseRow convert to it.
type leaseRow struct {
	elector.Lease
	Released bool
}

// listLeases lists every lease in s, by name. SQLite and PostgreSQL list
// their rows, a free lease with its last holder and token. etcd and MySQL
// have no List: their lease names are read from the key prefix or the
// table, and each lease with Get, which returns nothing for a free lease:
// its row then has only the name, and Released.
func listLeases(ctx context.Context, s elector.Store) ([]leaseRow, error) {
	var names []string
	var err error
	switch s := s.(type) {
	case *sqlitelease.Store:
		ls, err := s.List(ctx)
		return toRows(ls), err
	case *pglease.Store:
		ls, err := s.List(ctx)
		return toRows(ls), err
	case *etcdlease.Store:
		names, err = etcdNames(ctx, s)
	case *mysqllease.Store:
		names, err = mysqlNames(ctx, s)
	case *k8sStore:
		names, err = s.names(ctx)
	default:
		return nil, fmt.Errorf("leaderd cannot list the leases of a %T", s)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	rows := make([]leaseRow, 0, len(names))
	for _, name := range names {
		l, err := s.Get(ctx, name)
		switch {
		case errors.Is(err, elector.ErrNoLease):
			rows = append(rows, leaseRow{Lease: elector.Lease{Name: name}, Released: true})
		case err != nil:
			return nil, err
		default:
			rows = append(rows, leaseRow{Lease: l})
		}
	}
	return rows, nil
}

// toRows converts a store's lease rows.
func toRows[R ~struct {
	elector.Lease
	Released bool
}](ls []R) []leaseRow {
	rows := make([]leaseRow, len(ls))
	for i, l := range ls {
		rows[i] = leaseRow(l)
	}
	return rows
}

// etcdNames returns the names of the leases under s's key prefix.
func etcdNames(ctx context.Context, s *etcdlease.Store) ([]string, error) {
	prefix := s.Key("")
	resp, err := s.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd: list the keys under %q: %w", prefix, err)
	}
	names := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		names = append(names, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return names, nil
}

// mysqlNames returns the names of the leases in s's table.
func mysqlNames(ctx context.Context, s *mysqllease.Store) ([]string, error) {
	rows, err := s.DB().QueryContext(ctx, "SELECT name FROM "+s.Table())
	if err != nil {
		return nil, fmt.Errorf("mysql: list the lease names in %s: %w", s.Table(), err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("mysql: list the lease names in %s: %w", s.Table(), err)
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// fence returns the check of the term that ctx carries that the demo's
// jobs on etcd and MySQL make on every pass: an empty fenced transaction,
// which fails with an error matching elector.ErrLeaseLost once the term is
// over. It returns nil for the other stores, where the reference jobs run.
func fence(s elector.Store) func(ctx context.Context) error {
	switch s := s.(type) {
	case *etcdlease.Store:
		return func(ctx context.Context) error {
			_, err := s.Fenced(ctx)
			return err
		}
	case *mysqllease.Store:
		return func(ctx context.Context) error {
			return s.Fenced(ctx, func(context.Context, *sql.Tx) error { return nil })
		}
	case *k8sStore:
		return s.fence
	}
	return nil
}
