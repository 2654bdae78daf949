package pglease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// renewBatchMax caps the renewals one batch statement carries.
const renewBatchMax = 1000

// renewals is the group commit of Renew. A Renew that finds no renewal of
// its Store in flight runs the plain Renew statement at once. Those that
// arrive while one is in flight wait in pending, and the batcher goroutine,
// started by the first of them and stopped by Close, sends them together in
// one RenewBatch statement, one batch in flight at a time. RenewBatch skips
// locked rows, so a lease whose row a fenced write holds never holds up the
// others: its Renew then runs the plain statement alone, as do those of
// leases lost.
type renewals struct {
	mu       sync.Mutex
	alone    int  // plain Renew statements in flight
	batching bool // a RenewBatch statement is in flight
	pending  []*renewReq
	started  bool
	stopped  bool
	kick     chan struct{} // wakes the batcher; buffered, 1
	ctx      context.Context
	cancel   context.CancelFunc // ends the batcher and its statement
	wg       sync.WaitGroup
}

// renewReq is one Renew waiting in a batch.
type renewReq struct {
	ctx   context.Context // the caller's
	l     elector.Lease
	ttlUS int64
	done  chan renewResult // buffered, 1: the batcher never blocks
}

// renewResult is what a renewal statement gave one lease: its new version,
// TTL and write time, or pgx.ErrNoRows if it was not renewed, or
// errNotInBatch, or the error of the statement.
type renewResult struct {
	version, ttlUS int64
	written        time.Time
	err            error
}

// errNotInBatch is the result of a lease that a RenewBatch statement did
// not renew: lost, or its row locked.
var errNotInBatch = errors.New("pglease: not renewed in the batch")

// renewRow renews l with TTL ttlUS microseconds: alone if no renewal is in
// flight, otherwise in the next batch.
func (s *Store) renewRow(ctx context.Context, l elector.Lease, ttlUS int64) renewResult {
	b := &s.renewals
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return renewResult{err: ErrClosed}
	}
	if b.alone == 0 && !b.batching && len(b.pending) == 0 {
		b.alone++
		b.mu.Unlock()
		r := s.renewOne(ctx, l, ttlUS)
		b.mu.Lock()
		b.alone--
		b.mu.Unlock()
		return r
	}
	req := &renewReq{ctx: ctx, l: l, ttlUS: ttlUS, done: make(chan renewResult, 1)}
	b.pending = append(b.pending, req)
	if !b.started {
		b.started = true
		b.kick = make(chan struct{}, 1)
		b.ctx, b.cancel = context.WithCancel(context.Background())
		b.wg.Add(1)
		go s.batchRenewals()
	}
	if !b.batching {
		b.wake() // else it runs this batch when the one in flight ends
	}
	b.mu.Unlock()
	var r renewResult
	select {
	case r = <-req.done:
	case <-ctx.Done():
		return renewResult{err: ctx.Err()}
	}
	if r.err == errNotInBatch {
		// The plain statement tells a lost lease from a locked row, and
		// waits for the lock without holding up the batches.
		r = s.renewOne(ctx, l, ttlUS)
	}
	return r
}

// wake wakes the batcher. b.mu is held.
func (b *renewals) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// batchRenewals is the batcher goroutine: it runs the pending renewals,
// batch after batch, until stopRenewals.
func (s *Store) batchRenewals() {
	b := &s.renewals
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.kick:
		}
		for s.renewBatch() {
		}
	}
}

// renewBatch runs one batch of the pending renewals, unless a batch is in
// flight or none is pending, and reports whether it ran one. A batch
// leaves out the renewals whose callers have gone and holds each lease name
// once; the rest waits for the next batch.
func (s *Store) renewBatch() bool {
	b := &s.renewals
	b.mu.Lock()
	if b.batching || b.stopped || len(b.pending) == 0 {
		b.mu.Unlock()
		return false
	}
	var batch []*renewReq
	names := make(map[string]bool)
	rest := b.pending[:0]
	for _, r := range b.pending {
		switch {
		case r.ctx.Err() != nil: // its caller has returned
		case len(batch) == renewBatchMax || names[r.l.Name]:
			rest = append(rest, r)
		default:
			batch = append(batch, r)
			names[r.l.Name] = true
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	b.batching = len(batch) > 0
	b.mu.Unlock()
	if len(batch) == 0 {
		return true
	}

	// The statement ends with the earliest deadline of its callers, so it
	// never outlives their windows, or when Close ends b.ctx.
	ctx := b.ctx
	var earliest time.Time
	for _, r := range batch {
		if d, ok := r.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if !earliest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, earliest)
		defer cancel()
	}
	for i, r := range s.renewMany(ctx, batch) {
		batch[i].done <- r
	}
	b.mu.Lock()
	b.batching = false
	b.mu.Unlock()
	return true
}

// renewOne runs the Renew statement for l.
func (s *Store) renewOne(ctx context.Context, l elector.Lease, ttlUS int64) renewResult {
	var r struct { // one allocation, as in scanLease
		renewResult
		dest [3]any
	}
	r.dest = [3]any{&r.version, &r.ttlUS, &r.written}
	r.err = s.queryRow(ctx, true, s.stmts.Renew, []any{l.Name, l.Holder, int64(l.Token), ttlUS}, r.dest[:]...)
	return r.renewResult
}

// renewMany runs the RenewBatch statement for batch, whose lease names are
// distinct, and returns the result of each. Like queryRow, it tries again
// once when the first attempt failed for want of a connection.
func (s *Store) renewMany(ctx context.Context, batch []*renewReq) []renewResult {
	names := make([]string, len(batch))
	holders := make([]string, len(batch))
	tokens := make([]int64, len(batch))
	ttls := make([]int64, len(batch))
	for i, r := range batch {
		names[i], holders[i], tokens[i], ttls[i] = r.l.Name, r.l.Holder, int64(r.l.Token), r.ttlUS
	}
	got := make(map[string]renewResult, len(batch))
	run := func() error {
		clear(got)
		rows, err := s.leases.Query(ctx, s.stmts.RenewBatch, names, holders, tokens, ttls)
		if err != nil {
			return err
		}
		defer rows.Close()
		var name string
		var r renewResult
		for rows.Next() {
			if err := rows.Scan(&name, &r.version, &r.ttlUS, &r.written); err != nil {
				return err
			}
			got[name] = r
		}
		return rows.Err()
	}
	err := run()
	if s.retry(ctx, err, true) {
		err = run()
	}
	out := make([]renewResult, len(batch))
	for i, r := range batch {
		res, ok := got[r.l.Name]
		switch {
		case err != nil:
			res = renewResult{err: err}
		case !ok:
			res = renewResult{err: errNotInBatch}
		}
		out[i] = res
	}
	return out
}

// stopRenewals ends the batcher, its statement in flight included, and
// waits for it; renewals still pending, and those that come later, fail
// with ErrClosed.
func (s *Store) stopRenewals() {
	b := &s.renewals
	b.mu.Lock()
	b.stopped = true
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	for _, r := range b.pending {
		r.done <- renewResult{err: ErrClosed}
	}
	b.pending = nil
	b.mu.Unlock()
}
