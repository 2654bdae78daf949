package etcdlease

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is an etcd member embedded in the test process: one member,
// loopback ports, its data in a temporary directory.
type etcdServer struct {
	cfg      *embed.Config
	e        *embed.Etcd
	endpoint string // host:port of its client URL
}

// startEtcd starts a member that the test's cleanup stops. It works
// offline and takes a fraction of a second.
func startEtcd(tb testing.TB) *etcdServer {
	tb.Helper()
	client, peer := freeURL(tb), freeURL(tb)
	srv := &etcdServer{cfg: etcdConfig(tb.TempDir(), client, peer), endpoint: client.Host}
	srv.start(tb)
	tb.Cleanup(func() { srv.e.Close() })
	return srv
}

// etcdConfig configures a one-member etcd with its data in dir, serving
// clients at client and its peer at peer.
func etcdConfig(dir string, client, peer url.URL) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // the data dies with the test
	cfg.TickMs, cfg.ElectionMs = 10, 100
	return cfg
}

func (srv *etcdServer) start(tb testing.TB) {
	tb.Helper()
	e, err := embed.StartEtcd(srv.cfg)
	require.NoError(tb, err)
	srv.e = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		tb.Fatalf("embedded etcd failed: %v", err)
	case <-time.After(20 * time.Second):
		tb.Fatal("embedded etcd was not ready within 20s")
	}
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL(tb testing.TB) url.URL {
	tb.Helper()
	u, err := freeLoopbackURL()
	require.NoError(tb, err)
	return u
}

func freeLoopbackURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

var prefixes atomic.Int64

// uniquePrefix returns a key prefix no other store of this process uses.
func uniquePrefix() string {
	return fmt.Sprintf("test/%d-%d/", time.Now().UnixNano(), prefixes.Add(1))
}

// openStore opens a Store on srv that the test's cleanup closes.
func openStore(tb testing.TB, srv *etcdServer, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(testCtx(tb), []string{srv.endpoint}, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// rawClient returns a plain etcd client on srv, as an operator's etcdctl.
func rawClient(tb testing.TB, srv *etcdServer) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// watchRunning reports whether s's watch runs.
func watchRunning(s *Store) bool { return s.changes.Running() }

// proxy forwards TCP connections from a loopback port to an etcd member,
// and can cut them all, as a network failure or a member restart would.
type proxy struct {
	l        net.Listener
	target   string
	endpoint string // host:port to give clients

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	held  bool // new connections are closed at once
	wg    sync.WaitGroup
}

// startProxy starts a proxy to srv that the test's cleanup stops.
func startProxy(tb testing.TB, srv *etcdServer) *proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &proxy{l: l, target: srv.endpoint, endpoint: l.Addr().String(), conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.held {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			in.Close()
			out.Close()
		}
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

// hold makes the proxy close every new connection (held) or forward them
// again.
func (p *proxy) hold(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = held
}

// cut closes every connection through the proxy; new ones still work
// unless it holds them.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) close() {
	p.l.Close()
	p.cut()
	p.wg.Wait()
}
