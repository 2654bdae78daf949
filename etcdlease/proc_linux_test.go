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
	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// The multi-process tests run this test binary as their helper processes
// (see TestMain), in this package's helper modes: a replica (replicaMain)
// on the etcd that the test embeds, or an etcd member ("etcd", etcdMain)
// for the CPU benchmark, which measures the client apart from the server.
func init() {
	helpers = map[string]func([]string) error{
		"replica": replicaMain,
		"etcd":    func([]string) error { return etcdMain() },
	}
}

// replicaMain runs one replica (see helperproc.Replica) on a Store of its
// own on the etcd at -endpoint. Its fenced writes put the key
// <-writes><holder>/<n> = "<token> <holder> <unix nanoseconds>".
func replicaMain(args []string) error {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "etcd host:port")
	prefix := fs.String("prefix", "", "lease key prefix")
	writes := fs.String("writes", "", "key prefix of the fenced writes")
	r := helperproc.ReplicaFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := Open(context.Background(), []string{*endpoint}, WithPrefix(*prefix))
	if err != nil {
		return err
	}
	defer store.Close()
	return r.Run(store, func(ctx context.Context, l elector.Lease, n int64) error {
		_, err := store.Fenced(ctx, clientv3.OpPut(fmt.Sprintf("%s%s/%d", *writes, l.Holder, n),
			fmt.Sprintf("%d %s %d", l.Token, l.Holder, time.Now().UnixNano())))
		return err
	})
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
// stopped leader (see replicatest.Failover).
func TestFailoverProcesses(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	replicatest.Failover(t, []string{"-endpoint", srv.endpoint, "-prefix", prefix}, openStore(t, srv, WithPrefix(prefix)))
}

// TestChaosProcesses runs the chaos schedule (see replicatest.Chaos) on
// replicas with Stores of their own on the test's etcd. The leaders'
// fenced writes are keys under a prefix of their own; etcd's revisions give
// their commit order. A paused etcd client holds nothing that would keep a
// candidate from taking over, so no pause excuses a longer gap.
func TestChaosProcesses(t *testing.T) {
	srv := startEtcd(t)
	prefix, writes := uniquePrefix(), uniquePrefix()
	raw := rawClient(t, srv)
	read := func(ctx context.Context) ([]replicatest.Write, error) {
		resp, err := raw.Get(ctx, writes, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
		if err != nil {
			return nil, err
		}
		all := make([]replicatest.Write, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			var (
				w     = replicatest.Write{Order: kv.ModRevision}
				nanos int64
			)
			_, key, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), writes), "/")
			if w.N, err = strconv.ParseInt(key, 10, 64); err != nil {
				return nil, fmt.Errorf("key %q: %w", kv.Key, err)
			}
			if _, err := fmt.Sscan(string(kv.Value), &w.Token, &w.Holder, &nanos); err != nil {
				return nil, fmt.Errorf("key %q value %q: %w", kv.Key, kv.Value, err)
			}
			w.At = time.Unix(0, nanos)
			all = append(all, w)
		}
		return all, nil
	}
	key := prefix + helperproc.LeaseName
	save := func(ctx context.Context) (func(context.Context) (bool, error), error) {
		resp, err := raw.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return nil, err
		}
		saved, released, err := decodeLease(helperproc.LeaseName, resp.Kvs[0])
		if err != nil || released {
			return nil, err
		}
		value := string(resp.Kvs[0].Value)
		return func(ctx context.Context) (bool, error) {
			resp, err := raw.Get(ctx, key)
			if err != nil || len(resp.Kvs) == 0 {
				return false, err
			}
			cur, released, err := decodeLease(helperproc.LeaseName, resp.Kvs[0])
			if err != nil || !released && cur.Token != saved.Token {
				return false, err // only over the same term or a released lease (see replicatest.ChaosStore.Save)
			}
			// A put cannot lower the revision: the version never goes back.
			txn, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
				Then(clientv3.OpPut(key, value)).Commit()
			return err == nil && txn.Succeeded, err
		}, nil
	}
	replicatest.Chaos(t, replicatest.ChaosStore{
		Args: []string{"-endpoint", srv.endpoint, "-prefix", prefix, "-writes", writes},
		Read: read,
		Save: save,
	})
}
