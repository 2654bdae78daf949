package jobconfig

import (
	"math"
	"testing"
	"time"
)

func TestJitter(t *testing.T) {
	for f, ok := range map[float64]bool{0: true, 0.5: true, 0.999: true, 1: false, -0.1: false, math.NaN(): false, math.Inf(1): false} {
		if err := Jitter("pkg", f); (err == nil) != ok {
			t.Errorf("Jitter(%v) = %v, want ok=%v", f, err, ok)
		}
	}
	if err := Jitter("pkg", 2); err == nil || err.Error() != "pkg: Jitter 2 is not in [0, 1)" {
		t.Errorf("Jitter(2) = %v", err)
	}
}

func TestDuration(t *testing.T) {
	d := time.Duration(0)
	if err := Duration("pkg", "Interval", &d, time.Second); err != nil || d != time.Second {
		t.Errorf("zero: %v, %v", err, d)
	}
	d = 2 * time.Second
	if err := Duration("pkg", "Interval", &d, time.Second); err != nil || d != 2*time.Second {
		t.Errorf("set: %v, %v", err, d)
	}
	d = -time.Second
	if err := Duration("pkg", "Interval", &d, time.Second); err == nil || err.Error() != "pkg: Interval -1s is negative" {
		t.Errorf("negative: %v", err)
	}
}
