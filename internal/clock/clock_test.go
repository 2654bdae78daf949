package clock

import (
	"testing"
	"time"
)

func TestSuspendMovesNowNotWall(t *testing.T) {
	t0, w0 := Now(), Wall()
	Suspend(time.Hour)
	defer Suspend(-time.Hour)
	if d := Since(t0); d < time.Hour {
		t.Fatalf("Since after a simulated 1h suspend = %v, want ≥ 1h", d)
	}
	if d := Wall().Sub(w0); d > time.Minute {
		t.Fatalf("Wall moved %v on a suspend; it must not", d)
	}
}

func TestStepMovesWallNotNow(t *testing.T) {
	t0, w0 := Now(), Wall()
	Step(-time.Hour)
	defer Step(time.Hour)
	if d := w0.Sub(Wall()); d < 59*time.Minute {
		t.Fatalf("Wall after a -1h step moved back %v, want about 1h", d)
	}
	if d := Since(t0); d < 0 || d > time.Minute {
		t.Fatalf("Since moved %v on a wall step; it must not", d)
	}
}

func TestSleptIsSmallAndNonNegative(t *testing.T) {
	if d := sleptSinceStart(time.Now(), true); d < -time.Millisecond || d > time.Hour {
		t.Fatalf("suspended since start = %v", d)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		Now()
	}
}

func TestSuspendedChangesOnlyOnSuspend(t *testing.T) {
	s0 := Suspended()
	if s := Suspended(); s != s0 {
		t.Fatalf("Suspended changed from %v to %v with no suspend", s0, s)
	}
	Suspend(time.Minute)
	defer Suspend(-time.Minute)
	if d := Suspended() - s0; d != time.Minute {
		t.Fatalf("Suspended grew by %v on a simulated 1m suspend, want 1m", d)
	}
}
