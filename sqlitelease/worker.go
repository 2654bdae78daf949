package sqlitelease

import (
	"context"
	"sync"

	"github.com/leaderaware/leaderaware/elector"
)

// leaseWorker runs the lease operations of a [Store] on one goroutine, one
// at a time, started by the first operation and stopped by Close. The SQLite
// driver runs a deep call stack: run on the callers' goroutines (a thousand
// terms, each renewing once per RenewInterval, their stacks shrunk by the
// garbage collector in between), every operation would grow and copy a
// stack again, which can cost more CPU than the operation itself. On one
// goroutine the stack stays grown, for the price of two goroutine switches
// per operation. The zero value with renewAll set is ready to use.
type leaseWorker struct {
	// renewAll runs a batch of renewals and sends each one's result; set
	// before the first renew.
	renewAll func(batch []*renewReq)

	mu      sync.Mutex
	jobs    chan func() error // unbuffered; nil until the goroutine starts
	results chan error        // unbuffered: the result of the job just taken
	renews  chan *renewReq    // unbuffered; nil until the goroutine starts
	quit    chan struct{}     // closed by stop
	done    chan struct{}     // closed when the goroutine returns
	stopped bool
}

// renewBatchMax caps the renewals that one batch carries.
const renewBatchMax = 500

// renewReq is one Renew for the worker, which sends its result on result.
type renewReq struct {
	ctx    context.Context // the caller's
	l      elector.Lease
	ttlMs  int64
	result chan renewResult // buffered, 1: the worker never blocks on it
}

// renewResult is what a renewal came to: the new version and when it was
// written, or the error (sql.ErrNoRows if the term is lost).
type renewResult struct {
	version, written int64
	err              error
}

// run runs fn on the worker goroutine and returns its error. It waits for
// the worker to take fn (returning ctx's error if ctx ends first, or
// [ErrClosed] after stop), then for fn to return: fn must heed ctx.
func (w *leaseWorker) run(ctx context.Context, fn func() error) error {
	jobs, results, _, quit, err := w.start()
	if err != nil {
		return err
	}
	select {
	case jobs <- fn:
	case <-ctx.Done():
		return ctx.Err()
	case <-quit:
		return ErrClosed
	}
	// The worker takes no other job before this caller, the only one
	// waiting on results now, has received fn's result.
	return <-results
}

// renew hands r to the worker and returns its result, or r.ctx's error
// once r.ctx ends. Renewals that wait for the worker while it is busy go
// together, in one batch (renewAll), which is how a leader of many leases
// renews them in a burst with one statement and one commit. A renewal
// given up on may still land: it is reported failed, never the reverse.
func (w *leaseWorker) renew(r *renewReq) renewResult {
	_, _, renews, quit, err := w.start()
	if err != nil {
		return renewResult{err: err}
	}
	r.result = make(chan renewResult, 1)
	select {
	case renews <- r:
	case <-r.ctx.Done():
		return renewResult{err: r.ctx.Err()}
	case <-quit:
		return renewResult{err: ErrClosed}
	}
	select {
	case res := <-r.result:
		return res
	case <-r.ctx.Done():
		return renewResult{err: r.ctx.Err()}
	}
}

// start starts the goroutine unless it runs already or the worker stopped.
func (w *leaseWorker) start() (jobs chan<- func() error, results <-chan error, renews chan<- *renewReq, quit <-chan struct{}, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil, nil, nil, nil, ErrClosed
	}
	if w.jobs == nil {
		w.jobs, w.results, w.renews = make(chan func() error), make(chan error), make(chan *renewReq)
		w.quit, w.done = make(chan struct{}), make(chan struct{})
		go w.loop(w.jobs, w.results, w.renews, w.quit, w.done)
	}
	return w.jobs, w.results, w.renews, w.quit, nil
}

func (w *leaseWorker) loop(jobs <-chan func() error, results chan<- error, renews <-chan *renewReq, quit, done chan struct{}) {
	defer close(done)
	var batch []*renewReq
	for {
		select {
		case fn := <-jobs:
			results <- fn()
		case r := <-renews:
			batch = append(batch[:0], r)
		more: // the renewals that wait already
			for len(batch) < renewBatchMax {
				select {
				case r := <-renews:
					batch = append(batch, r)
				default:
					break more
				}
			}
			w.renewAll(batch)
			clear(batch)
		case <-quit:
			return
		}
	}
}

// stop makes later calls of run return ErrClosed, and waits for the job in
// flight, if any, and the goroutine to return.
func (w *leaseWorker) stop() {
	w.mu.Lock()
	if !w.stopped && w.quit != nil {
		close(w.quit)
	}
	w.stopped = true
	done := w.done
	w.mu.Unlock()
	if done != nil {
		<-done
	}
}
