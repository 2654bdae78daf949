package clock

import (
	"os"
	"testing"
	"time"
)

// A Waker wakes the goroutine blocked in its Wait when the elapsed clock
// of its [Clock] reaches the deadline given to Set, counting time the
// machine spends suspended. Its methods are safe for concurrent use; one
// goroutine at a time calls Wait.
type Waker interface {
	// Set makes Wait return when the clock reaches deadline (at once if it
	// has), in place of the deadline set before.
	Set(deadline time.Time)
	// Wait blocks until the deadline passes, or Stop. It returns false
	// after Stop (or if the timer fails).
	Wait() bool
	// Stop ends the Waker: Wait returns false, now and from then on.
	Stop()
}

// waker is the Waker of [System].
//
// How it works: on Linux, outside test binaries, Wait reads a timerfd on
// CLOCK_BOOTTIME through Go's netpoller. That clock counts suspend, so the
// timerfd fires on the resume from a suspend that passed its deadline, where
// a Go timer would wait the suspend's length longer. In test binaries a Go
// timer stands in (a goroutine blocked on a file descriptor is not durably
// blocked, so it would stop the fake clock of a synctest bubble), and so it
// does where no timerfd can be had.
type waker struct {
	file *os.File // the timerfd, or nil

	// Without a timerfd:
	timer *time.Timer   // calls wake at the deadline
	woken chan struct{} // buffered 1
	stop  chan struct{} // closed by Stop
}

// NewWaker returns a Waker of [System] with no deadline set. The caller
// must Stop it.
func NewWaker() Waker { return newWaker(!testing.Testing()) }

// newWaker returns a Waker on a timerfd if kernel is set and the system has
// one, on a Go timer otherwise.
func newWaker(kernel bool) *waker {
	w := &waker{}
	if kernel {
		w.file = openTimerfd()
	}
	if w.file == nil {
		w.woken, w.stop = make(chan struct{}, 1), make(chan struct{})
		w.timer = time.AfterFunc(time.Hour, w.wake)
		w.timer.Stop()
	}
	return w
}

func (w *waker) Set(deadline time.Time) {
	d := max(deadline.Sub(Now()), time.Nanosecond)
	if w.file != nil {
		setTimerfd(w.file, d)
		return
	}
	w.timer.Reset(d)
}

// wake makes Wait return at once: the Go timer's callback.
func (w *waker) wake() {
	select {
	case w.woken <- struct{}{}:
	default:
	}
}

func (w *waker) Wait() bool {
	if w.file != nil {
		var expirations [8]byte
		_, err := w.file.Read(expirations[:])
		return err == nil
	}
	select {
	case <-w.woken:
		return true
	case <-w.stop:
		return false
	}
}

func (w *waker) Stop() {
	if w.file != nil {
		_ = w.file.Close() // a Read in progress returns os.ErrClosed
		return
	}
	w.timer.Stop()
	close(w.stop)
}
