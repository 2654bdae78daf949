package clock

import (
	"testing"
	"time"
)

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
