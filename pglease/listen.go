package pglease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/internal/backoff"
)

// Listener timings.
const (
	// listenBackoffMin and listenBackoffMax bound the wait before the
	// listener reconnects; it doubles after each failed attempt.
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenKeepAlive is how long the listener waits for a notification
	// before it pings its connection, so that a silently dead connection is
	// replaced within about listenKeepAlive + listenPingTimeout.
	listenKeepAlive   = 30 * time.Second
	listenPingTimeout = 5 * time.Second
	// listenCloseTimeout bounds closing a listener connection.
	listenCloseTimeout = time.Second
)

// WatchRelease implements [elector.ReleaseWatcher]. The channel receives a
// value soon after the named lease is released through any Store on the same
// table; spurious values are allowed (every watcher is poked when the
// listener (re)connects, since it may have missed a release meanwhile). The
// channel is never closed and sends never block. Call stop once done.
//
// The first WatchRelease or [Store.WatchLease] starts the Store's listener:
// one goroutine with a dedicated connection (outside the pool) that LISTENs
// on the store's channel, reconnects with backoff after it loses its
// connection, and stops in [Store.Close]. Until it is connected, and with
// [WithoutListener], only releases through this Store wake its watchers;
// callers poll regardless, so this only makes handoff faster.
// [elector.LeaseElector] uses WatchLease, which also hears these releases.
func (s *Store) WatchRelease(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	set := s.watchers[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		s.watchers[name] = set
	}
	set[ch] = struct{}{}
	s.mu.Unlock()
	s.startListener()
	return ch, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(set, ch)
		if len(s.watchers[name]) == 0 {
			delete(s.watchers, name)
		}
	})
}

// poke tells the watchers of name, without blocking, that it was released.
func (s *Store) poke(name string) {
	s.mu.Lock()
	for ch := range s.watchers[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	s.leaseWatch.released(name)
}

// pokeAll wakes every watcher without blocking, and makes the lease watcher
// read at once.
func (s *Store) pokeAll() {
	s.mu.Lock()
	for _, set := range s.watchers {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	s.mu.Unlock()
	s.leaseWatch.pokeLocked()
}

// probeListener sends the listener's probe: a notification on the store's
// channel with an empty payload, from a lease connection.
func (s *Store) probeListener(ctx context.Context) error {
	const probe = `SELECT pg_notify($1, '')`
	_, err := s.leases.Exec(ctx, probe, s.channel)
	if s.retry(ctx, err, true) {
		_, err = s.leases.Exec(ctx, probe, s.channel)
	}
	return err
}

// listener is the one goroutine of a Store that LISTENs for releases.
type listener struct {
	cfg      *pgx.ConnConfig
	channel  string
	log      *slog.Logger
	secrets  []string
	onNotify func(name string)
	onListen func()
	// probe sends the listener a notification with an empty payload
	// (never a lease name) from another connection.
	probe func(ctx context.Context) error
	// keepAlive is how long it waits for a notification before it pings.
	keepAlive time.Duration

	cancel      context.CancelFunc
	done        chan struct{} // closed when run returns
	sessions    atomic.Int64  // successful LISTENs so far, counted after onListen
	probesHeard atomic.Int64  // sessions that heard a notification
	warnedDeaf  bool          // the deaf warning was logged; run's goroutine only
}

// startListener starts the listener goroutine, unless it runs, the Store
// has none (WithoutListener) or is closed.
func (s *Store) startListener() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil || !s.opts.listen || s.closed.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		cfg:       s.leases.Config().ConnConfig,
		channel:   s.channel,
		log:       s.opts.logger,
		secrets:   s.secrets,
		onNotify:  s.poke,
		onListen:  s.pokeAll,
		probe:     s.probeListener,
		keepAlive: s.listenKeepAlive,
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	go l.run(ctx)
	s.listener = l
}

// stop stops the listener and waits until its goroutine and connection are
// gone.
func (l *listener) stop() {
	l.cancel()
	<-l.done
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff.Retry(ctx, listenBackoffMin, listenBackoffMax, l.session, func(err error, wait time.Duration) {
		l.log.Warn("pglease: release listener lost its connection; reconnecting",
			"channel", l.channel, "retry_in", wait, "err", scrub(err.Error(), l.secrets))
	})
}

// session connects, LISTENs and pokes watchers until the connection fails or
// ctx ends. listened reports whether LISTEN succeeded. It closes its
// connection and waits for pgx to finish with it before returning.
func (l *listener) session(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), listenCloseTimeout)
		_ = conn.Close(cctx)
		cancel()
		<-conn.PgConn().CleanupDone()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false, err
	}
	l.log.Debug("pglease: release listener connected", "channel", l.channel)
	l.onListen() // a release may have happened while we were not listening
	l.sessions.Add(1)
	// A session that hears nothing, not even a probe, by its first
	// keepalive is deaf: a transaction pooler gave the LISTEN to a server
	// connection it then lent to others.
	pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
	probing, heard := l.probe(pctx) == nil, false
	cancel()
	for {
		wctx, cancel := context.WithTimeout(ctx, l.keepAlive)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && n.Channel == l.channel:
			if !heard {
				heard = true
				l.probesHeard.Add(1)
			}
			if n.Payload != "" {
				l.onNotify(n.Payload)
			}
		case err == nil:
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			if probing && !heard && !l.warnedDeaf {
				l.warnedDeaf = true
				l.log.Warn("pglease: the release listener hears no notifications, not even the one the store sent it "+
					"(a transaction pooler such as PgBouncer lends its session to others?); candidates in other processes "+
					"notice a release only at their next poll: point the DSN at the server or a session-mode pool, "+
					"or use WithoutListener", "channel", l.channel, "waited", l.keepAlive)
			}
			probing = false
			pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, err
			}
		default:
			return true, err
		}
	}
}
