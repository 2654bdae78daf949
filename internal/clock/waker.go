package clock

import (
	"os"
	"sync"
	"testing"
	"time"
)

// A Waker wakes the goroutine blocked in its Wait when the elapsed clock
// ([Now]) reaches the deadline given to Set, counting time the machine
// spends suspended, and after every [Suspend]. Its methods are safe for
// concurrent use; one goroutine at a time calls Wait.
//
// How it works: on Linux, outside test binaries, Wait reads a timerfd on
// CLOCK_BOOTTIME through Go's netpoller. That clock counts suspend, so the
// timerfd fires on the resume from a suspend that passed its deadline, where
// a Go timer would wait the suspend's length longer. In test binaries a Go
// timer stands in (a goroutine blocked on a file descriptor is not durably
// blocked, so it would stop the fake clock of a synctest bubble), and so it
// does where no timerfd can be had.
type Waker struct {
	file *os.File // the timerfd, or nil

	// Without a timerfd:
	timer *time.Timer   // calls wake at the deadline
	woken chan struct{} // buffered 1
	stop  chan struct{} // closed by Stop
}

// wakers are the Wakers not stopped yet, which Suspend wakes.
var wakers struct {
	sync.Mutex
	m map[*Waker]struct{}
}

// NewWaker returns a Waker with no deadline set. The caller must Stop it.
func NewWaker() *Waker { return newWaker(!testing.Testing()) }

// newWaker returns a Waker on a timerfd if kernel is set and the system has
// one, on a Go timer otherwise.
func newWaker(kernel bool) *Waker {
	w := &Waker{}
	if kernel {
		w.file = openTimerfd()
	}
	if w.file == nil {
		w.woken, w.stop = make(chan struct{}, 1), make(chan struct{})
		w.timer = time.AfterFunc(time.Hour, w.wake)
		w.timer.Stop()
	}
	wakers.Lock()
	defer wakers.Unlock()
	if wakers.m == nil {
		wakers.m = map[*Waker]struct{}{}
	}
	wakers.m[w] = struct{}{}
	return w
}

// Set makes Wait return when [Now] reaches deadline (at once if it has),
// in place of the deadline set before.
func (w *Waker) Set(deadline time.Time) {
	d := max(Until(deadline), time.Nanosecond)
	if w.file != nil {
		setTimerfd(w.file, d)
		return
	}
	w.timer.Reset(d)
}

// wake makes Wait return at once.
func (w *Waker) wake() {
	if w.file != nil {
		setTimerfd(w.file, time.Nanosecond)
		return
	}
	select {
	case w.woken <- struct{}{}:
	default:
	}
}

// Wait blocks until the deadline passes, a Suspend, or Stop. It returns
// false after Stop (or if the timerfd fails).
func (w *Waker) Wait() bool {
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

// Stop ends the Waker: Wait returns false, now and from then on.
func (w *Waker) Stop() {
	wakers.Lock()
	delete(wakers.m, w)
	wakers.Unlock()
	if w.file != nil {
		_ = w.file.Close() // a Read in progress returns os.ErrClosed
		return
	}
	w.timer.Stop()
	close(w.stop)
}

// wakeAll wakes every Waker, as a resume does.
func wakeAll() {
	wakers.Lock()
	defer wakers.Unlock()
	for w := range wakers.m {
		w.wake()
	}
}
