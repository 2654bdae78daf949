package stepclock

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSuspendMovesNowNotWall(t *testing.T) {
	c := New()
	t0, w0 := c.Now(), c.Wall()
	c.Suspend(time.Hour)
	if d := c.Now().Sub(t0); d < time.Hour {
		t.Fatalf("Now moved %v on a simulated 1h suspend, want ≥ 1h", d)
	}
	if d := c.Wall().Sub(w0); d > time.Minute {
		t.Fatalf("Wall moved %v on a suspend; it must not", d)
	}
}

func TestStepMovesWallNotNow(t *testing.T) {
	c := New()
	t0, w0 := c.Now(), c.Wall()
	c.Step(-time.Hour)
	if d := w0.Sub(c.Wall()); d < 59*time.Minute {
		t.Fatalf("Wall after a -1h step moved back %v, want about 1h", d)
	}
	if d := c.Now().Sub(t0); d < 0 || d > time.Minute {
		t.Fatalf("Now moved %v on a wall step; it must not", d)
	}
}

func TestSuspendedChangesOnlyOnSuspend(t *testing.T) {
	c := New()
	s0 := c.Suspended()
	if s := c.Suspended(); s != s0 {
		t.Fatalf("Suspended changed from %v to %v with no suspend", s0, s)
	}
	c.Suspend(time.Minute)
	if d := c.Suspended() - s0; d != time.Minute {
		t.Fatalf("Suspended grew by %v on a simulated 1m suspend, want 1m", d)
	}
	if d := c.SuspendedSoFar() - s0; d < time.Minute {
		t.Fatalf("SuspendedSoFar grew by %v on a simulated 1m suspend, want ≥ 1m", d)
	}
}

// TestWakerWakesOnSuspend: a Waker of the clock wakes at its deadline on the
// suspended clock, and at once on a Suspend, even one followed by a Set
// before Wait returned.
func TestWakerWakesOnSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		c.Suspend(time.Hour)
		w := c.NewWaker()
		defer w.Stop()
		start := time.Now()
		w.Set(c.Now().Add(time.Minute))
		if !w.Wait() {
			t.Fatal("Wait returned false before Stop")
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("woke after %v of fake time, want 1m", d)
		}

		start = time.Now()
		w.Set(c.Now().Add(time.Hour))
		c.Suspend(time.Second)
		w.Set(c.Now().Add(time.Hour))
		if !w.Wait() {
			t.Fatal("Wait returned false before Stop")
		}
		if d := time.Since(start); d > time.Microsecond {
			t.Fatalf("woke %v after a Suspend, want at once", d)
		}
	})
}

// TestWakerStop: Wait returns false after Stop, and Suspend wakes only the
// Wakers not stopped.
func TestWakerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		w := c.NewWaker()
		w.Stop()
		c.Suspend(time.Second)
		if w.Wait() {
			t.Fatal("Wait returned true after Stop")
		}
		if len(c.wakers) != 0 {
			t.Fatalf("%d Wakers kept after Stop", len(c.wakers))
		}
	})
}
