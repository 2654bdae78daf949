package etcdlease

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderaware/leaderaware/elector"
)

// TestOpenBadInput proves that bad endpoints and options give an error
// naming the value at once, before anything is dialed.
func TestOpenBadInput(t *testing.T) {
	ok := []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		name      string
		endpoints []string
		opts      []Option
		want      string
	}{
		{"no endpoints", nil, nil, "no endpoints"},
		{"empty endpoint", []string{"127.0.0.1:1", ""}, nil, `endpoint 1, ""`},
		{"blank endpoint", []string{" "}, nil, `endpoint 0, " "`},
		{"endpoint with a space", []string{"127.0.0.1:1 127.0.0.2:1"}, nil, `"127.0.0.1:1 127.0.0.2:1"`},
		{"empty prefix", ok, []Option{WithPrefix("")}, "key prefix is empty"},
		{"prefix without slash", ok, []Option{WithPrefix("leases")}, `key prefix "leases" must end in '/'`},
		{"prefix with a control character", ok, []Option{WithPrefix("a\nb/")}, `key prefix "a\nb/" has a non-printable character`},
		{"zero dial timeout", ok, []Option{WithDialTimeout(0)}, "dial timeout 0s must be positive"},
		{"negative op timeout", ok, []Option{WithOpTimeout(-time.Second)}, "operation timeout -1s must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			s, err := Open(context.Background(), tt.endpoints, tt.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, time.Since(start), 100*time.Millisecond, "bad input must be refused before dialing")
			t.Log(err)
		})
	}
}

// TestOpenUnreachable proves that Open gives up within its dial timeout or
// its ctx, whichever ends first, on an endpoint where nothing listens and
// on one that accepts connections and never answers, naming the endpoint.
func TestOpenUnreachable(t *testing.T) {
	closed := freeURL(t).Host // nothing listens there any more
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close() // it accepts (the kernel's backlog) and never speaks

	for _, tt := range []struct {
		name     string
		endpoint string
		ctx      time.Duration // 0: no deadline
		dial     time.Duration
		want     string
	}{
		{"closed port, dial timeout", closed, 0, 500 * time.Millisecond, "did not answer within the dial timeout 500ms"},
		{"silent port, dial timeout", silent.Addr().String(), 0, 500 * time.Millisecond, "did not answer within the dial timeout 500ms"},
		{"closed port, ctx first", closed, 300 * time.Millisecond, time.Minute, "context deadline exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			start := time.Now()
			s, err := Open(ctx, []string{tt.endpoint}, WithDialTimeout(tt.dial))
			took := time.Since(start)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.endpoint)
			assert.Contains(t, err.Error(), tt.want)
			bound := tt.dial
			if tt.ctx > 0 {
				bound = min(bound, tt.ctx)
			}
			assert.Less(t, took, bound+time.Second, "Open must give up within %v", bound)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
		})
	}
}

// TestNewBadInput proves that New refuses a nil client and the options
// only Open can apply.
func TestNewBadInput(t *testing.T) {
	_, err := New(nil)
	require.ErrorContains(t, err, "nil client")
	c := deadClient(t)
	_, err = New(c, WithTLS(&tls.Config{}), WithDialTimeout(time.Second))
	require.ErrorContains(t, err, "etcdlease.WithTLS(...), etcdlease.WithDialTimeout(1s) apply to Open only")
	_, err = New(c, WithPrefix("x"))
	require.ErrorContains(t, err, `key prefix "x"`)
}

// deadClient returns a client whose endpoint nobody serves: clientv3.New
// does not dial until the first call.
func deadClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{freeURL(t).Host}, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestOpTimeoutBoundsCalls proves that every operation given a ctx without
// a deadline returns within the operation timeout when etcd does not
// answer, and that a ctx deadline is kept.
func TestOpTimeoutBoundsCalls(t *testing.T) {
	const opTimeout = 300 * time.Millisecond
	s, err := New(deadClient(t), WithOpTimeout(opTimeout))
	require.NoError(t, err)
	defer s.Close()
	l := elector.Lease{Name: "job", Holder: "a", Token: 5, Version: 5, TTL: time.Minute}
	ctx := context.Background()
	for name, call := range map[string]func(context.Context) error{
		"TryAcquire": func(ctx context.Context) error {
			_, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
			return err
		},
		"Renew":   func(ctx context.Context) error { _, err := s.Renew(ctx, l, time.Minute); return err },
		"Release": func(ctx context.Context) error { return s.Release(ctx, l) },
		"Get":     func(ctx context.Context) error { _, err := s.Get(ctx, "job"); return err },
		"FencedLease": func(ctx context.Context) error {
			_, err := s.FencedLease(ctx, l, clientv3.OpPut("x", "y"))
			return err
		},
	} {
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		assert.Less(t, took, opTimeout+time.Second, "%s without a deadline", name)
		assert.NotErrorIs(t, err, elector.ErrLeaseLost, "%s: an unreachable etcd is not a lost lease", name)

		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start = time.Now()
		err = call(short)
		cancel()
		require.Error(t, err, name)
		assert.Less(t, time.Since(start), opTimeout, "%s must keep the ctx deadline", name)
	}
}

// TestClosed proves that operations after Close return ErrClosed, that
// Close is idempotent, and that a Store from New leaves the client open.
func TestClosed(t *testing.T) {
	srv := startEtcd(t)
	s, err := Open(testCtx(t), []string{srv.endpoint}, WithPrefix(uniquePrefix()))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Get(testCtx(t), "job")
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.FencedLease(testCtx(t), elector.Lease{Name: "job", Token: 1}, clientv3.OpPut("x", "y"))
	require.ErrorIs(t, err, ErrClosed)

	raw := rawClient(t, srv)
	s, err = New(raw, WithPrefix(uniquePrefix()))
	require.NoError(t, err)
	_, err = s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = raw.Get(testCtx(t), "x")
	require.NoError(t, err, "Close must leave the caller's client open")
}
