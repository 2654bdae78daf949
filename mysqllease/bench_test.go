package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkStore measures each store operation against its floor: the same
// statements run bare on the same lease pool, without the store's
// validation, wrapping and retries. The two run in pairs, in alternating
// order, so that the server's and the machine's drift (commit fsyncs
// dominate the writes) lands on both alike. Reported: store-ns/op,
// sql-ns/op and their ratio, store/sql; goal ≤ 1.3. The server round trips
// are: acquire 2 (a read, then one autocommit UPDATE), renew 1 (one
// autocommit UPDATE), get and a refused acquire (acquire-held) 1.
//
//	LEADERAWARE_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' go test -run '^$' -bench . -count 5 ./
func BenchmarkStore(b *testing.B) {
	s := openStore(b, "")
	ctx := context.Background()
	db := s.leases.db
	const ttl = time.Minute

	b.Run("acquire", func(b *testing.B) {
		ls := mustAcquire(b, s, "acquire/store")
		lq := mustAcquire(b, s, "acquire/sql")
		i := 0
		paired(b, func() error {
			var err error
			ls, err = s.TryAcquire(ctx, ls.Name, holders[i%2], ttl, ls)
			return err
		}, func() error {
			var err error
			lq, err = bareTakeover(ctx, s, db, lq, holders[i%2], ttl)
			i++
			return err
		})
	})
	b.Run("acquire-held", func(b *testing.B) {
		l := mustAcquire(b, s, "held")
		paired(b, func() error {
			if _, err := s.TryAcquire(ctx, l.Name, "other", ttl, elector.Lease{}); !errors.Is(err, elector.ErrHeld) {
				return fmt.Errorf("want ErrHeld, got %v", err)
			}
			return nil
		}, func() error {
			cur, released, err := s.read(ctx, db, l.Name)
			if err == nil && (released || cur.Is(elector.Lease{})) {
				err = errors.New("free")
			}
			return err
		})
	})
	b.Run("renew", func(b *testing.B) {
		l := mustAcquire(b, s, "renew")
		paired(b, func() error {
			_, err := s.Renew(ctx, l, ttl)
			return err
		}, func() error {
			_, err := bareRenew(ctx, s, db, l, ttl)
			return err
		})
	})
	b.Run("get", func(b *testing.B) {
		l := mustAcquire(b, s, "get")
		paired(b, func() error {
			_, err := s.Get(ctx, l.Name)
			return err
		}, func() error {
			_, _, err := s.read(ctx, db, l.Name)
			return err
		})
	})
}

// paired runs store and bare once each per iteration, alternating which
// goes first, and reports the time of each and their ratio.
func paired(b *testing.B, store, bare func() error) {
	var ts, tq time.Duration
	run := func(f func() error, total *time.Duration) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*total += time.Since(start)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			run(store, &ts)
			run(bare, &tq)
		} else {
			run(bare, &tq)
			run(store, &ts)
		}
		n++
	}
	b.ReportMetric(float64(ts.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(tq.Nanoseconds())/float64(n), "sql-ns/op")
	b.ReportMetric(float64(ts)/float64(tq), "store/sql")
}

var (
	holders = [2]string{"bench-a", "bench-b"}
	runs    atomic.Int64 // names never repeat across -count runs
)

func mustAcquire(b *testing.B, s *Store, name string) elector.Lease {
	name = fmt.Sprintf("%s/%d", name, runs.Add(1))
	l, err := s.TryAcquire(context.Background(), name, holders[1], time.Minute, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// bareTakeover is TryAcquire's statements for a takeover of observed: the
// read, then the UPDATE, whose LAST_INSERT_ID is the new token.
func bareTakeover(ctx context.Context, s *Store, db *sql.DB, observed elector.Lease, holder string, ttl time.Duration) (elector.Lease, error) {
	cur, _, err := s.read(ctx, db, observed.Name)
	if err != nil {
		return elector.Lease{}, err
	}
	written := s.wallMicros()
	res, err := db.ExecContext(ctx, s.sqlTake, holder, micros(ttl), written, cur.Name, cur.Token, cur.Version)
	token, err := wrote(res, err)
	if err != nil || token == 0 {
		return elector.Lease{}, fmt.Errorf("take: token %d, %v", token, err)
	}
	return elector.Lease{Name: cur.Name, Holder: holder, Token: token, Version: takeVersion(cur.Version, token),
		TTL: fromMicros(micros(ttl)), Written: time.UnixMicro(written)}, nil
}

// bareRenew is Renew's UPDATE, whose LAST_INSERT_ID is the new version.
func bareRenew(ctx context.Context, s *Store, db *sql.DB, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	written := s.wallMicros()
	version, err := wrote(db.ExecContext(ctx, s.sqlRenew, micros(ttl), written, l.Name, l.Token, l.Holder))
	if err != nil || version == 0 {
		return elector.Lease{}, fmt.Errorf("renew: version %d, %v", version, err)
	}
	return elector.Lease{Name: l.Name, Holder: l.Holder, Token: l.Token, Version: version,
		TTL: fromMicros(micros(ttl)), Written: time.UnixMicro(written)}, nil
}

// BenchmarkBatch measures reading and renewing 1,000 leases: GetMany and
// RenewMany (one statement each), next to 1,000 calls of Renew. ns/op is
// per 1,000 leases.
//
//	LEADERAWARE_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' go test -run '^$' -bench Batch ./
func BenchmarkBatch(b *testing.B) {
	s := openStore(b, "")
	ctx := context.Background()
	ls := make([]elector.Lease, batchMax)
	names := make([]string, batchMax)
	for i := range ls {
		ls[i] = mustAcquire(b, s, "batch")
		names[i] = ls[i].Name
	}
	b.Run("get-many", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetMany(ctx, names); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew-many", func(b *testing.B) {
		for b.Loop() {
			var err error
			if ls, err = s.RenewMany(ctx, ls); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew-each", func(b *testing.B) {
		for b.Loop() {
			for i, l := range ls {
				var err error
				if ls[i], err = s.Renew(ctx, l, l.TTL); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
