//go:build linux

package etcdlease

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/leaderaware/leaderaware/elector"
)

// The multi-process tests run this test binary as their child processes
// (see TestMain): a replica ("leader", leaderMain) on the etcd that the test
// embeds, or an etcd member ("etcd", etcdMain) for the CPU benchmark, which
// measures the client apart from the server.
func init() { runChild = childMain }

func childMain(kind string, args []string) int {
	var err error
	switch kind {
	case "leader":
		err = leaderMain(args)
	case "etcd":
		err = etcdMain()
	default:
		err = fmt.Errorf("unknown child %q", kind)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", kind, err)
		return 1
	}
	return 0
}

// leaderMain runs one replica (see replica) on a Store of its own on the
// etcd at -endpoint. Its fenced writes put the key
// <-writes><holder>/<n> = "<token> <holder> <unix nanoseconds>".
func leaderMain(args []string) error {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "etcd host:port")
	prefix := fs.String("prefix", "", "lease key prefix")
	writes := fs.String("writes", "", "key prefix of the fenced writes")
	r := replicaFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	store, err := Open(context.Background(), []string{*endpoint}, WithPrefix(*prefix))
	if err != nil {
		return err
	}
	defer store.Close()
	write := func(ctx context.Context, l elector.Lease, n int64) error {
		_, err := store.Fenced(ctx, clientv3.OpPut(fmt.Sprintf("%s%s/%d", *writes, l.Holder, n),
			fmt.Sprintf("%d %s %d", l.Token, l.Holder, time.Now().UnixNano())))
		return err
	}
	return r.run(store, write, sig)
}

// etcdMain runs an etcd member on free loopback ports, prints
// "READY <host:port>" once it serves, and stops on SIGTERM.
func etcdMain() error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	dir, err := os.MkdirTemp("", "etcdlease-child-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	client, err := freeLoopbackURL()
	if err != nil {
		return err
	}
	peer, err := freeLoopbackURL()
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(etcdConfig(dir, client, peer))
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(20 * time.Second):
		return errors.New("etcd was not ready within 20s")
	}
	fmt.Printf("READY %s\n", client.Host)
	<-sig
	return nil
}

// TestFailoverProcesses runs four replicas as processes, each with a Store
// of its own on the test's etcd (over loopback), and checks the failover
// bounds of the lease model with a crashed, a frozen and a gracefully
// stopped leader (see runFailover).
func TestFailoverProcesses(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	reader := openStore(t, srv, WithPrefix(prefix))
	c := newCluster(t, append([]string{"-endpoint", srv.endpoint, "-prefix", prefix}, procTimings()...)...)
	runFailover(t, c, func(ctx context.Context) (elector.Lease, error) { return reader.Get(ctx, "job") })
}

// TestChaosProcesses runs the chaos schedule (see runChaos) on replicas
// with Stores of their own on the test's etcd. The leaders' fenced writes
// are keys under a prefix of their own; etcd's revisions give their commit
// order. A paused etcd client holds nothing that would keep a candidate
// from taking over, so no pause excuses a longer gap.
func TestChaosProcesses(t *testing.T) {
	srv := startEtcd(t)
	prefix, writes := uniquePrefix(), uniquePrefix()
	raw := rawClient(t, srv)
	c := newCluster(t, append([]string{"-endpoint", srv.endpoint, "-prefix", prefix, "-writes", writes,
		"-every", chaosEvery.String()}, procTimings()...)...)
	read := func(ctx context.Context) ([]row, error) {
		resp, err := raw.Get(ctx, writes, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
		if err != nil {
			return nil, err
		}
		rows := make([]row, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			var (
				r     = row{order: kv.ModRevision}
				nanos int64
			)
			_, key, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), writes), "/")
			if r.n, err = strconv.ParseInt(key, 10, 64); err != nil {
				return nil, fmt.Errorf("key %q: %w", kv.Key, err)
			}
			if _, err := fmt.Sscan(string(kv.Value), &r.token, &r.holder, &nanos); err != nil {
				return nil, fmt.Errorf("key %q value %q: %w", kv.Key, kv.Value, err)
			}
			r.at = time.Unix(0, nanos)
			rows = append(rows, r)
		}
		return rows, nil
	}
	runChaos(t, c, read, false)
}
