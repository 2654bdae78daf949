package sqlitelease

import (
	"context"
	"sync"
)

// leaseWorker runs the lease operations of a [Store] on one goroutine, one
// at a time, started by the first operation and stopped by Close. The SQLite
// driver runs a deep call stack: run on the callers' goroutines (a thousand
// terms, each renewing once per RenewInterval, their stacks shrunk by the
// garbage collector in between), every operation would grow and copy a
// stack again, which can cost more CPU than the operation itself. On one
// goroutine the stack stays grown, for the price of two goroutine switches
// per operation. The zero value is ready to use.
type leaseWorker struct {
	mu      sync.Mutex
	jobs    chan func() error // unbuffered; nil until the goroutine starts
	results chan error        // unbuffered: the result of the job just taken
	quit    chan struct{}     // closed by stop
	done    chan struct{}     // closed when the goroutine returns
	stopped bool
}

// run runs fn on the worker goroutine and returns its error. It waits for
// the worker to take fn (returning ctx's error if ctx ends first, or
// [ErrClosed] after stop), then for fn to return: fn must heed ctx.
func (w *leaseWorker) run(ctx context.Context, fn func() error) error {
	jobs, results, quit, err := w.start()
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

// start starts the goroutine unless it runs already or the worker stopped.
func (w *leaseWorker) start() (jobs chan<- func() error, results <-chan error, quit <-chan struct{}, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil, nil, nil, ErrClosed
	}
	if w.jobs == nil {
		w.jobs, w.results = make(chan func() error), make(chan error)
		w.quit, w.done = make(chan struct{}), make(chan struct{})
		go w.loop(w.jobs, w.results, w.quit, w.done)
	}
	return w.jobs, w.results, w.quit, nil
}

func (w *leaseWorker) loop(jobs <-chan func() error, results chan<- error, quit, done chan struct{}) {
	defer close(done)
	for {
		select {
		case fn := <-jobs:
			results <- fn()
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
