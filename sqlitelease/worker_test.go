package sqlitelease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestLeaseWorkerRunsJobsOneAtATime(t *testing.T) {
	var w leaseWorker
	defer w.stop()
	var running, ran, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			err := w.run(t.Context(), func() error {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				ran.Add(1)
				running.Add(-1)
				return errors.New("job error")
			})
			if err == nil || err.Error() != "job error" {
				t.Errorf("run returned %v, want the job's error", err)
			}
		})
	}
	wg.Wait()
	if ran.Load() != 50 || overlaps.Load() != 0 {
		t.Fatalf("%d jobs ran, %d overlapping; want 50, none overlapping", ran.Load(), overlaps.Load())
	}
}

func TestLeaseWorkerWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w leaseWorker
		defer w.stop()
		release := make(chan struct{})
		busy := make(chan error)
		go func() { busy <- w.run(t.Context(), func() error { <-release; return nil }) }()
		synctest.Wait() // the worker runs the first job

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		ran := false
		err := w.run(ctx, func() error { ran = true; return nil })
		if !errors.Is(err, context.DeadlineExceeded) || ran {
			t.Fatalf("run behind a busy worker: %v (ran: %v), want DeadlineExceeded without running", err, ran)
		}
		close(release)
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
	})
}

func TestLeaseWorkerStopWaitsForTheJobInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w leaseWorker
		started, release := make(chan struct{}), make(chan struct{})
		first, queued := make(chan error), make(chan error)
		go func() { first <- w.run(t.Context(), func() error { close(started); <-release; return nil }) }()
		<-started
		go func() { queued <- w.run(t.Context(), func() error { return nil }) }()
		stopped := make(chan struct{})
		go func() { w.stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a job ran")
		default:
		}
		if err := <-queued; !errors.Is(err, ErrClosed) {
			t.Fatalf("a job queued at stop: %v, want ErrClosed", err)
		}
		close(release)
		<-stopped
		if err := <-first; err != nil {
			t.Fatalf("the job in flight at stop: %v, want its own result", err)
		}
		if err := w.run(t.Context(), func() error { return nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("run after stop: %v, want ErrClosed", err)
		}
		w.stop() // again: returns at once
	})
}

func TestLeaseWorkerNeverStarted(t *testing.T) {
	var w leaseWorker
	w.stop()
	if err := w.run(t.Context(), func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("run after stop: %v, want ErrClosed", err)
	}
}

// BenchmarkLeaseWorker measures the handoff to the worker and back that
// every lease operation pays.
func BenchmarkLeaseWorker(b *testing.B) {
	var w leaseWorker
	defer w.stop()
	nop := func() error { return nil }
	for b.Loop() {
		if err := w.run(b.Context(), nop); err != nil {
			b.Fatal(err)
		}
	}
}
