package clock

import (
	"testing"
	"time"
)

func TestSteadyIgnoresJitter(t *testing.T) {
	for _, tt := range []struct{ last, s, want time.Duration }{
		{0, time.Millisecond, 0},
		{0, -time.Millisecond, 0},
		{10 * time.Second, 10*time.Second + 2*time.Millisecond, 10 * time.Second},
		{0, 10 * time.Second, 10 * time.Second},
		{0, 6 * time.Millisecond, 6 * time.Millisecond},
	} {
		if got := steady(tt.last, tt.s); got != tt.want {
			t.Errorf("steady(%v, %v) = %v, want %v", tt.last, tt.s, got, tt.want)
		}
	}
}
