//go:build linux

package sqlitelease

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

const sidecarAttempts = 8

// openSidecar opens <db>-live next to the file abs resolves to (creating it
// with the database file's mode and owner) and locks a random byte of it in
// [1, 2^62), refusing, with an error naming it, a file that is a symbolic
// link, not regular, neither empty nor a mark, unwritable or unlockable.
func openSidecar(abs string) (*sidecar, error) {
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	path := abs + "-live"
	fd, err := sideFile(abs, path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("liveness file %q is a symbolic link; remove it: %w", path, err)
	case errors.Is(err, unix.EISDIR):
		return nil, fmt.Errorf("liveness file %q is a directory; remove it: %w", path, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return nil, fmt.Errorf("liveness file %q: the file or its directory is not writable: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("liveness file %q: %w", path, err)
	}
	sc := &sidecar{path: path, fd: fd}
	if err := sc.lock(); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return sc, nil
}

func (sc *sidecar) lock() error {
	var st unix.Stat_t
	if err := unix.Fstat(sc.fd, &st); err != nil {
		return fmt.Errorf("liveness file %q: %w", sc.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("liveness file %q is not a regular file (mode %#o); remove it", sc.path, st.Mode)
	}
	if st.Size != 0 && st.Size != markSize {
		return fmt.Errorf("liveness file %q holds %d bytes, but sqlitelease keeps it empty or %d bytes long: %w", sc.path, st.Size, markSize, errNotMark)
	}
	if st.Size == markSize {
		// Read without the mark's lock, only to tell a foreign file: a
		// read torn by a concurrent raise still mixes the bytes of two
		// marks, whose top bits are clear.
		if _, err := sc.readMark(); err != nil {
			return err
		}
	}
	sc.file = fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	for range sidecarAttempts {
		// Byte 0 is the lock of the high-water mark (see withMark).
		offset := 1 + rand.Int64N(1<<62-1)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: offset, Len: 1}
		err := unix.FcntlFlock(uintptr(sc.fd), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			sc.offset = offset
			return nil
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES), errors.Is(err, unix.EINTR):
			// Another Store locks this byte: try another.
		default:
			return fmt.Errorf("liveness file %q cannot be locked (the filesystem must support open file description locks): %w", sc.path, err)
		}
	}
	return fmt.Errorf("liveness file %q: no free byte found in %d random offsets; is something else locking the whole file?", sc.path, sidecarAttempts)
}

// markSize is the length of the token high-water mark at the start of the
// liveness file, big-endian.
const markSize = 8

const (
	minMarkBackoff = 20 * time.Microsecond
	maxMarkBackoff = 5 * time.Millisecond
)

// withMark runs issue with the mark (0 if none, or if it was overwritten
// since Open) and raises it to the token issue returns, unless issue fails.
// The caller holds the database's write lock, so issue can roll back if the
// raise fails; a lock on byte 0 guards against Stores of another database
// file at the path. The raise is a pwrite without fsync: a power cut may lose
// it, as it may the last commits, and then the database's mark or the clock
// floor covers it. F_OFD_SETLKW cannot be interrupted in Go, hence retries.
func (sc *sidecar) withMark(ctx context.Context, issue func(mark int64) (token int64, err error)) error {
	if err := sc.lockMark(ctx); err != nil {
		return err
	}
	defer sc.unlockMark()
	mark, err := sc.readMark()
	if errors.Is(err, errNotMark) {
		// Truncated or overwritten since Open: the mark is a floor only,
		// and the database's own mark still floors the token. The raise
		// below makes the file whole again.
		mark, err = 0, nil
	}
	if err != nil {
		return err
	}
	token, err := issue(mark)
	if err != nil || token <= mark {
		return err
	}
	var buf [markSize]byte
	binary.BigEndian.PutUint64(buf[:], uint64(token))
	return sc.do(func(fd int) error {
		n, err := unix.Pwrite(fd, buf[:], 0)
		if err == nil && n < markSize {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fmt.Errorf("raise the token high-water mark in liveness file %q: %w", sc.path, err)
		}
		return nil
	})
}

func (sc *sidecar) lockMark(ctx context.Context) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	var timer *time.Timer
	for backoff := minMarkBackoff; ; backoff = min(2*backoff, maxMarkBackoff) {
		err := sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk) })
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINTR):
			return fmt.Errorf("lock the token high-water mark in liveness file %q: %w", sc.path, err)
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock the token high-water mark in liveness file %q: %w", sc.path, ctx.Err())
		case <-timer.C:
		}
	}
}

func (sc *sidecar) unlockMark() {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	_ = sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk) })
}

var errNotMark = errors.New("it is not a liveness file; move it away (or put the database at another path)")

// readMark reads the mark: 0 in an empty file, errNotMark for a file that
// holds no mark.
func (sc *sidecar) readMark() (int64, error) {
	var buf [markSize]byte
	var n int
	err := sc.do(func(fd int) (err error) {
		n, err = unix.Pread(fd, buf[:], 0)
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("read the token high-water mark in liveness file %q: %w", sc.path, err)
	case n == 0:
		return 0, nil
	case n < markSize:
		return 0, fmt.Errorf("liveness file %q holds %d bytes, but sqlitelease keeps it empty or %d bytes long: %w", sc.path, n, markSize, errNotMark)
	}
	mark := int64(binary.BigEndian.Uint64(buf[:]))
	if mark < 0 || mark == math.MaxInt64 {
		return 0, fmt.Errorf("liveness file %q holds %#x, which is no token high-water mark: %w", sc.path, buf, errNotMark)
	}
	return mark, nil
}

// do runs f on the descriptor, kept open meanwhile, or returns errSidecarClosed.
func (sc *sidecar) do(f func(fd int) error) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.fd < 0 {
		return errSidecarClosed
	}
	return f(sc.fd)
}

// held reports whether another open file description locks the byte at
// offset (F_OFD_GETLK, which never blocks).
func (sc *sidecar) held(offset int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: offset, Len: 1}
	if err := sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk) }); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// othersLocked reports whether another Store may hold a liveness lock in the
// file (or the test failed).
func (sc *sidecar) othersLocked() bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 1, Len: 0}
	err := sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk) })
	return err != nil || lk.Type != unix.F_UNLCK
}

// close closes the file, which drops the lock; it is safe to call twice.
func (sc *sidecar) close() error {
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.fd < 0 {
		return nil
	}
	err := unix.Close(sc.fd)
	sc.fd = -1
	if err != nil {
		return fmt.Errorf("close liveness file %q: %w", sc.path, err)
	}
	return nil
}
