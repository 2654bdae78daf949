package clock

import "testing"

// TestWakerOnTimerfd checks the Waker of production binaries on Linux. A
// real suspend cannot be made here: that CLOCK_BOOTTIME counts it is the
// kernel's promise.
func TestWakerOnTimerfd(t *testing.T) {
	w := newWaker(true)
	if w.file == nil {
		t.Fatal("no timerfd on Linux")
	}
	testWaker(t, w)
}
