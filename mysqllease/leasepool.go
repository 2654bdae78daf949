package mysqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
)

// querier is what lease statements run on: a *sql.DB or a *sql.Conn. It
// has no BeginTx: every lease statement is one autocommit statement.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// leasePool carries lease traffic apart from the jobs' pool, so that job
// queries cannot starve renewals: after [Open] a *sql.DB of its own, after
// [New] connections reserved from the caller's pool until Close.
type leasePool struct {
	db      *sql.DB
	reserve bool // New: run on reserved connections of db

	slots  chan struct{}  // reserve: one per connection that may be held
	idle   chan *sql.Conn // reserve: held connections between operations
	mu     sync.Mutex     // orders put against close's drain of idle
	closed atomic.Bool
}

func newLeasePool(db *sql.DB, reserve bool, n int) *leasePool {
	p := &leasePool{db: db, reserve: reserve}
	if reserve {
		p.slots = make(chan struct{}, n)
		p.idle = make(chan *sql.Conn, n)
		for range n {
			p.slots <- struct{}{}
		}
	}
	return p
}

// do runs fn on a lease connection. A reserved connection that failed is
// given back to the caller's pool (which drops it if broken) and replaced;
// fn runs once more if the failure was before anything reached the server.
func (p *leasePool) do(ctx context.Context, fn func(q querier) error) error {
	if !p.reserve {
		return fn(p.db)
	}
	for attempt := 0; ; attempt++ {
		c, err := p.get(ctx)
		if err != nil {
			return err
		}
		err = fn(c)
		p.put(c, err)
		notSent := errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
		if !notSent || attempt == 1 || ctx.Err() != nil {
			return err
		}
	}
}

func (p *leasePool) get(ctx context.Context) (*sql.Conn, error) {
	select {
	case <-p.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case c := <-p.idle:
		if alive(ctx, c) {
			return c, nil
		}
		_ = c.Close()
	default:
	}
	if p.closed.Load() {
		p.slots <- struct{}{}
		return nil, ErrClosed
	}
	c, err := p.db.Conn(ctx)
	if err != nil {
		p.slots <- struct{}{}
	}
	return c, err
}

func (p *leasePool) put(c *sql.Conn, err error) {
	p.mu.Lock()
	if p.closed.Load() || isConnError(err) {
		_ = c.Close()
	} else {
		p.idle <- c // never blocks: a slot was taken for it
	}
	p.mu.Unlock()
	p.slots <- struct{}{}
}

// alive reports whether c still looks usable, by the check that database/sql
// runs on a pooled connection before reuse (for go-sql-driver/mysql, a
// non-blocking read that finds a socket the server closed, e.g. after
// wait_timeout, without a round trip). A dead connection is closed.
func alive(ctx context.Context, c *sql.Conn) bool {
	return c.Raw(func(dc any) error {
		if r, ok := dc.(driver.SessionResetter); ok {
			return r.ResetSession(ctx)
		}
		return nil
	}) == nil
}

// close gives the reserved connections back to the caller's pool, or closes
// the pool that Open made. Connections in use are given back when their
// operation ends.
func (p *leasePool) close() error {
	if !p.reserve {
		return p.db.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed.Store(true)
	for {
		select {
		case c := <-p.idle:
			_ = c.Close()
		default:
			return nil
		}
	}
}
