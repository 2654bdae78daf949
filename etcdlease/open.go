package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderaware/leaderaware/internal/fanout"
)

// The keepalive of the clients that Open makes. etcd refuses pings more
// often than its --grpc-keepalive-min-time, 5s by default.
const (
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 5 * time.Second
)

// Open connects to the etcd cluster at endpoints ("host:port" or
// "https://host:port") and returns a Store on a client of its own, which
// [Store.Close] closes. It returns once etcd answered a linearizable read
// (so a cluster without quorum is refused too), or fails when the dial
// timeout ([DefaultDialTimeout], [WithDialTimeout]) or ctx runs out,
// whichever is first, with an error naming the endpoints.
//
// The client pings etcd every 10s while the lease watch runs and drops a
// connection that does not answer within 5s, so that a silently dead
// connection does not keep the watch waiting. It logs nothing; for a
// client with authentication, a logger or other settings, use [New].
func Open(ctx context.Context, endpoints []string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(endpoints) == 0 {
		return nil, errors.New("etcdlease: Open: no endpoints; give at least one, like \"127.0.0.1:2379\"")
	}
	for i, ep := range endpoints {
		if strings.TrimSpace(ep) == "" || strings.ContainsAny(ep, " \t\r\n") {
			return nil, fmt.Errorf("etcdlease: Open: endpoint %d, %q, is not an address like \"127.0.0.1:2379\"", i, ep)
		}
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          o.dialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		TLS:                  o.tls,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlease: connect to etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	pctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	if _, err := client.Get(pctx, o.prefix, clientv3.WithCountOnly()); err != nil {
		_ = client.Close()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("etcdlease: etcd %s did not answer within the dial timeout %v: %w",
				strings.Join(endpoints, ","), o.dialTimeout, err)
		}
		return nil, fmt.Errorf("etcdlease: connect to etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	return newStore(client, true, o), nil
}

// New returns a Store on client, which the caller keeps: [Store.Close] does
// not close it. New does not contact etcd. [WithDialTimeout] and [WithTLS]
// are for Open; set them on the client instead.
func New(client *clientv3.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("etcdlease: New: nil client")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(o.openOnly) > 0 {
		return nil, fmt.Errorf("etcdlease: New: %s apply to Open only; configure the client instead", strings.Join(o.openOnly, ", "))
	}
	return newStore(client, false, o), nil
}

func newStore(client *clientv3.Client, owns bool, o options) *Store {
	s := &Store{
		client:     client,
		ownsClient: owns,
		prefix:     o.prefix,
		opTimeout:  o.opTimeout,
		log:        o.logger,
	}
	s.changes = fanout.New(s.watch)
	return s
}

// Close stops the store's watch and waits for its goroutine, then
// closes the client if [Open] made it. Operations after Close return
// [ErrClosed]. Close is idempotent; its error is the client's.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.changes.Close()
		if s.ownsClient {
			err = s.client.Close()
		}
	})
	return err
}
