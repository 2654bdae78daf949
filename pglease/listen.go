package pglease

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/backoff"
)

// Listener timings: reconnect backoff, and the idle wait before a ping
// that finds a silently dead connection.
const (
	listenBackoffMin   = 50 * time.Millisecond
	listenBackoffMax   = 5 * time.Second
	listenKeepAlive    = 30 * time.Second
	listenPingTimeout  = 5 * time.Second
	listenCloseTimeout = time.Second
)

// Notify implements [elector.Notifier]: it reports each release through
// any Store on the same table as the lease's new state (free), and asks for
// every lease to be read again whenever the listener (re)connects, since a
// release may have gone unheard meanwhile. With [WithoutListener], only the
// releases made through this Store.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	return s.changes.Notify(changed)
}

// freed is the Change of a lease released.
func freed(name string) elector.Change {
	return elector.Change{Name: name, State: elector.Lease{Name: name}, Known: true}
}

// listener LISTENs for releases on a connection of its own.
type listener struct {
	s          *Store
	cfg        *pgx.ConnConfig
	send       func(elector.Change)
	warnedDeaf bool
}

// listen is the Store's wake source (see Notify): a listener, reconnecting
// until ctx ends.
func (s *Store) listen(ctx context.Context, send func(elector.Change)) {
	(&listener{s: s, cfg: s.leases.Config().ConnConfig, send: send}).run(ctx)
}

func (l *listener) run(ctx context.Context) {
	backoff.Retry(ctx, listenBackoffMin, listenBackoffMax, l.session, func(err error, wait time.Duration) {
		l.s.opts.logger.Warn("pglease: release listener lost its connection; reconnecting",
			"channel", l.s.channel, "retry_in", wait, "err", scrub(err.Error(), l.s.secrets))
	})
}

// session connects, LISTENs and reports releases until the connection
// fails or ctx ends; listened reports whether LISTEN succeeded.
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()); err != nil {
		return false, err
	}
	l.s.opts.logger.Debug("pglease: release listener connected", "channel", l.s.channel)
	l.send(elector.Change{}) // a release may have gone unheard: read every lease again
	// A session that hears not even its own probe (an empty payload) by its
	// first keepalive is deaf: a transaction pooler lent its server
	// connection to others.
	pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
	var sent bool
	probing, heard := l.s.queryRow(pctx, true, `SELECT true FROM pg_notify($1, '')`, []any{l.s.channel}, &sent) == nil, false
	cancel()
	for {
		wctx, cancel := context.WithTimeout(ctx, l.s.listenKeepAlive)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && n.Channel == l.s.channel:
			heard = true
			if n.Payload != "" {
				l.send(freed(n.Payload))
			}
		case err == nil:
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			if probing && !heard && !l.warnedDeaf {
				l.warnedDeaf = true
				l.s.opts.logger.Warn("pglease: the release listener hears no notifications, not even the one the store sent it "+
					"(a transaction pooler such as PgBouncer lends its session to others?); candidates in other processes "+
					"notice a release only at their next poll: point the DSN at the server or a session-mode pool, "+
					"or use WithoutListener", "channel", l.s.channel, "waited", l.s.listenKeepAlive)
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
