package pglease

import (
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// proxy is a TCP proxy on loopback in front of the test server. freeze
// turns every connection open at that moment into a dead one, as a network
// partition or a dead peer would: bytes in either direction are swallowed,
// neither end is told. Connections made later pass normally.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	pairs  []*proxyPair
	closed bool

	frozenClosed atomic.Int64 // frozen connections the client has closed
}

type proxyPair struct {
	client, server net.Conn
	frozen         atomic.Bool
}

// newProxy starts a proxy to the test server, closed when t ends, and
// returns it with a DSN that connects through it.
func newProxy(t testing.TB) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(testDSN(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		t.Skipf("the proxy tests need %s to be a postgres:// URL with a host", envDSN)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	p := &proxy{ln: ln, target: net.JoinHostPort(u.Hostname(), port)}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pair := &proxyPair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.pairs = append(p.pairs, pair)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(pair, c, s, true) })
		p.wg.Go(func() { p.pipe(pair, s, c, false) })
	}
}

// pipe copies src to dst until src fails, swallowing what it reads once the
// pair is frozen. When the client of a frozen pair closes, the server end
// stays open: the server is not told either.
func (p *proxy) pipe(pair *proxyPair, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pair.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if pair.frozen.Load() {
				if fromClient {
					p.frozenClosed.Add(1)
				}
				return
			}
			_ = dst.Close()
			return
		}
	}
}

// freeze makes every open connection dead.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pair := range p.pairs {
		pair.frozen.Store(true)
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, pair := range p.pairs {
		_ = pair.client.Close()
		_ = pair.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestFrozenConnectionDiscarded proves that a lease operation on a dead
// connection returns when its context ends, that the connection is closed
// rather than handed to the next operation, and that the next operation
// succeeds on a fresh connection.
func TestFrozenConnectionDiscarded(t *testing.T) {
	px, dsn := newProxy(t)
	s, err := Open(testCtx(t), dsn, WithSchema(freshSchema(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	_, err = s.Get(testCtx(t), "frozen")
	require.ErrorIs(t, err, elector.ErrNoLease)

	px.freeze()
	ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.TryAcquire(ctx, "frozen", "a", time.Minute, elector.Lease{})
	took := time.Since(start)
	require.Error(t, err, "TryAcquire on a dead connection")
	t.Log(err)
	assert.Less(t, took, 2*time.Second, "TryAcquire must return when its context ends")
	waitFor(t, 5*time.Second, "the dead connection closed", func() bool { return px.frozenClosed.Load() > 0 })

	ctx, cancel = context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	l, err := s.TryAcquire(ctx, "frozen", "a", time.Minute, elector.Lease{})
	require.NoError(t, err, "the next call runs on a fresh connection")
	require.NoError(t, s.Release(ctx, l))
}

// TestFrozenIdleConnectionPingBounded proves that the health check of an
// idle lease connection is bounded on its own: a call whose context leaves
// room finds the idle connection dead, drops it and succeeds on a fresh
// one, instead of spending its whole deadline on the ping.
func TestFrozenIdleConnectionPingBounded(t *testing.T) {
	px, dsn := newProxy(t)
	s, err := Open(testCtx(t), dsn, WithSchema(freshSchema(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	_, err = s.Get(testCtx(t), "frozen")
	require.ErrorIs(t, err, elector.ErrNoLease)
	time.Sleep(1100 * time.Millisecond) // idle long enough to be pinged on its next use
	px.freeze()

	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	start := time.Now()
	l, err := s.TryAcquire(ctx, "frozen", "a", time.Minute, elector.Lease{})
	require.NoError(t, err, "a dead idle connection must be replaced within the call")
	t.Logf("TryAcquire took %v", time.Since(start))
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, s.Release(ctx, l))
}
