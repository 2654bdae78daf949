package clock

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// openTimerfd returns a nonblocking timerfd on CLOCK_BOOTTIME (so the
// netpoller waits on it), or nil if the kernel refuses one.
func openTimerfd() *os.File {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "timerfd")
}

// setTimerfd arms f to fire once, d from now on CLOCK_BOOTTIME. Control
// keeps the descriptor open meanwhile; on a closed f it does nothing.
func setTimerfd(f *os.File, d time.Duration) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		_ = unix.TimerfdSettime(int(fd), 0, &spec, nil) // fails only on a bad descriptor or value
	})
}
