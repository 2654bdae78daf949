package etcdlease

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/storebench"
)

// The benchmarks compare each store operation with the bare clientv3 call
// that a hand-written lease on etcd would make for it: the same round trip,
// without the store's compares, encoding and checks. Both run on the same
// embedded member (fsync off, so disk latency does not hide the store's
// own cost), with the same kind of ctx (a deadline, as the elector gives),
// and alternate within each iteration, so that both see the same noise of
// a shared machine. Each reports the median latency of both and their
// ratio (the goal is at most 1.3):
//
//	go test -run '^$' -bench . -benchtime 5000x ./

// benchValue is a lease value as long as the ones the store writes.
const benchValue = `{"released":false,"token":123456,"holder":"host-1234-abcdef01","ttl":"15s","written":"2026-11-30T05:03:39.123456789Z"}`

const benchHolder = "host-1234-abcdef01"

// compare runs store and bare alternately, b.N times each, and reports
// their median latencies and the ratio of the medians.
func compare(b *testing.B, store, bare func() error) {
	var ts, tb []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := store(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		ts, tb = append(ts, mid.Sub(start)), append(tb, time.Since(mid))
	}
	ms, mb := median(ts), median(tb)
	b.ReportMetric(float64(ms.Microseconds()), "µs-etcdlease")
	b.ReportMetric(float64(mb.Microseconds()), "µs-bare")
	b.ReportMetric(float64(ms)/float64(mb), "ratio")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func benchSetup(b *testing.B) (context.Context, *Store, *clientv3.Client) {
	srv := startEtcd(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	return ctx, openStore(b, srv, WithPrefix(uniquePrefix())), rawClient(b, srv)
}

// BenchmarkAcquire takes a lease over, again and again, observing the
// lease it took last. Bare: a compare-and-set on the key's ModRevision that
// reads the key when it fails.
func BenchmarkAcquire(b *testing.B) {
	ctx, s, raw := benchSetup(b)
	var l elector.Lease
	key, rev := "bench/acquire", int64(0)
	compare(b, func() (err error) {
		l, err = s.TryAcquire(ctx, "job", benchHolder, 15*time.Second, l)
		return err
	}, func() error {
		resp, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, benchValue)).Else(clientv3.OpGet(key)).Commit()
		rev = resp.Header.Revision
		return err
	})
}

// BenchmarkRenew renews one lease. Bare: a compare-and-set on the key's
// ModRevision.
func BenchmarkRenew(b *testing.B) {
	ctx, s, raw := benchSetup(b)
	l, err := s.TryAcquire(ctx, "job", benchHolder, 15*time.Second, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	key := "bench/renew"
	put, err := raw.Put(ctx, key, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	rev := put.Header.Revision
	compare(b, func() (err error) {
		l, err = s.Renew(ctx, l, 15*time.Second)
		return err
	}, func() error {
		resp, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, benchValue)).Commit()
		rev = resp.Header.Revision
		return err
	})
}

// BenchmarkGet reads one held lease. Bare: a linearizable Get of the key.
func BenchmarkGet(b *testing.B) {
	ctx, s, raw := benchSetup(b)
	if _, err := s.TryAcquire(ctx, "job", benchHolder, 15*time.Second, elector.Lease{}); err != nil {
		b.Fatal(err)
	}
	key := "bench/get"
	if _, err := raw.Put(ctx, key, benchValue); err != nil {
		b.Fatal(err)
	}
	compare(b, func() error {
		_, err := s.Get(ctx, "job")
		return err
	}, func() error {
		_, err := raw.Get(ctx, key)
		return err
	})
}

// BenchmarkFenced commits one put fenced by the current term. Bare: the
// same put, fenced by a compare on the lease key's ModRevision.
func BenchmarkFenced(b *testing.B) {
	ctx, s, raw := benchSetup(b)
	l, err := s.TryAcquire(ctx, "job", benchHolder, 15*time.Second, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	if l, err = s.Renew(ctx, l, 15*time.Second); err != nil {
		b.Fatal(err)
	}
	put := clientv3.OpPut("bench/fenced", "value")
	compare(b, func() error {
		_, err := s.FencedLease(ctx, l, put)
		return err
	}, func() error {
		_, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.Key("job")), "=", int64(l.Version))).
			Then(put).Commit()
		return err
	})
}

// BenchmarkFailover measures how long a lease takes to pass between two
// Stores (two clients, as in two processes) on the embedded etcd, with TTL
// 1.5s, RenewInterval 0.5s and RetryInterval 0.5s: a graceful handoff and
// a crash (see storebench.Failover). etcd's watch wakes the candidate at
// once; A resigns 0–250 ms after B found the lease held, as for MySQL.
//
//	go test -run '^$' -bench Failover ./
func BenchmarkFailover(b *testing.B) {
	srv := startEtcd(b)
	prefix := uniquePrefix()
	storebench.Failover(b, openStore(b, srv, WithPrefix(prefix)), openStore(b, srv, WithPrefix(prefix)), 250*time.Millisecond)
}
