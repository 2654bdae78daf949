//go:build linux

package sqlitelease

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileEvents reads an inotify instance on the liveness file, on a goroutine
// that stop ends and waits for: touches (a term began or ended) and closes
// (a Store closed, or a process died).
type fileEvents struct {
	c      chan struct{} // capacity 1: an event came since the last receive
	closed atomic.Bool   // one of those events was a close
	f      *os.File      // the inotify instance
	done   chan struct{} // closed when the goroutine returns
	once   sync.Once
}

const defaultWatchInterval = 250 * time.Millisecond

// events starts watching the liveness file: nil without one, and an error if
// inotify cannot (see fs.inotify.max_user_instances).
func (sc *sidecar) events() (*fileEvents, error) {
	if sc == nil {
		return nil, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	// The descriptor's /proc link names the file this Store locks, even
	// if the path names another one now.
	err = sc.do(func(lfd int) error {
		_, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(lfd), unix.IN_ATTRIB|unix.IN_CLOSE_WRITE)
		return err
	})
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("inotify watch of %q: %w", sc.path, err)
	}
	ev := &fileEvents{c: make(chan struct{}, 1), f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	go ev.read()
	return ev, nil
}

func (ev *fileEvents) read() {
	defer close(ev.done)
	var buf [4096]byte
	for {
		n, err := ev.f.Read(buf[:])
		if err != nil {
			return // closed by stop (anything else would repeat)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			e := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if e.Mask&(unix.IN_CLOSE_WRITE|unix.IN_Q_OVERFLOW) != 0 {
				ev.closed.Store(true)
			}
			off += unix.SizeofInotifyEvent + int(e.Len)
		}
		select {
		case ev.c <- struct{}{}:
		default:
		}
	}
}

// wait returns the channel of events; nil (never ready) for a nil fileEvents.
func (ev *fileEvents) wait() <-chan struct{} {
	if ev == nil {
		return nil
	}
	return ev.c
}

func (ev *fileEvents) tookClose() bool { return ev != nil && ev.closed.Swap(false) }

func (ev *fileEvents) stop() {
	if ev == nil {
		return
	}
	ev.once.Do(func() { _ = ev.f.Close() })
	<-ev.done
}

// touch sets the liveness file's times to now (futimens), waking the
// Notify of the Stores that watch it; a failure only leaves them to their
// watch interval.
func (sc *sidecar) touch() {
	if sc == nil {
		return
	}
	_ = sc.do(func(fd int) error {
		// utimensat(fd, NULL, NULL, 0), which is futimens(fd, NULL).
		_, _, _ = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
		return nil
	})
}
