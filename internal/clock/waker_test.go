package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// waitFor returns whether w.Wait returned within d of real time (false if
// it returned false).
func waitFor(t *testing.T, w Waker, d time.Duration) bool {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- w.Wait() }()
	select {
	case ok := <-got:
		return ok
	case <-time.After(d):
		t.Fatalf("Wait did not return within %v", d)
		return false
	}
}

// testWaker checks a Waker in real time: it wakes at its deadline and not
// before, at once when set to a deadline that has passed (as a test clock
// wakes it on a simulated suspend), and Wait returns false after Stop.
func testWaker(t *testing.T, w Waker) {
	start := Now()
	w.Set(start.Add(50 * time.Millisecond))
	if !waitFor(t, w, 10*time.Second) {
		t.Fatal("Wait returned false before Stop")
	}
	if d := Now().Sub(start); d < 50*time.Millisecond {
		t.Fatalf("woke %v after Set, before its deadline 50ms", d)
	}

	w.Set(Now().Add(time.Hour))
	w.Set(time.Time{})
	if !waitFor(t, w, 10*time.Second) {
		t.Fatal("Wait returned false after a Set to a passed deadline")
	}

	w.Stop()
	if waitFor(t, w, 10*time.Second) {
		t.Fatal("Wait returned true after Stop")
	}
}

func TestWakerOnGoTimer(t *testing.T) { testWaker(t, newWaker(false)) }

// TestWakerInBubble: in test binaries a Waker keeps a synctest bubble's
// fake clock running and wakes at its deadline on it.
func TestWakerInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWaker()
		defer w.Stop()
		start := time.Now()
		w.Set(Now().Add(time.Minute))
		if !w.Wait() {
			t.Fatal("Wait returned false before Stop")
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("woke after %v of fake time, want 1m", d)
		}
	})
}
