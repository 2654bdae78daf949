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

// sidecarAttempts is how many random offsets openSidecar tries: one is
// taken by another Store only if 62 random bits collide.
const sidecarAttempts = 8

// openSidecar opens (creating it with the database file's mode and owner,
// see sideFile) the liveness file next to the database file at the
// absolute path abs, as SQLite places its -wal and -shm files (next to the
// file a symbolic link points to), and locks a
// byte of it at a random offset in [1, 2^62). It refuses, with an error
// naming the file, one that is a symbolic link, not a regular file, neither
// empty nor a high-water mark (8 bytes; anything else belongs to something
// else), not writable, or that cannot be locked.
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

// lock checks the file behind sc.fd and locks a free byte of it.
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

// markSize is the length of the high-water mark at the start of the
// liveness file: the largest token issued through it, 8 bytes big-endian.
const markSize = 8

// Backoff between attempts to lock the high-water mark.
const (
	minMarkBackoff = 20 * time.Microsecond
	maxMarkBackoff = 5 * time.Millisecond
)

// withMark runs issue with the high-water mark of the liveness file (0 in a
// file that has none yet, or whose mark was truncated or overwritten since
// Open) and raises the mark to the token issue returns,
// unless issue fails. The caller holds the write lock of the database, so
// that no other Store of the file runs withMark meanwhile and issue can
// roll back if the raise fails; an exclusive lock on byte 0 of the file
// (which no liveness lock uses) makes the read-modify-write atomic against
// Stores of another database file at the same path (one deleted under its
// processes), which that write lock does not exclude. It is taken with
// F_OFD_SETLK and retried until ctx ends, not with F_OFD_SETLKW, which no
// Go program can interrupt (see testHolders).
//
// The raise is a pwrite, without fsync (which would cost milliseconds per
// acquire): the mark outlives the process at once, but a power cut may lose
// it, as it may lose the database's last commits (synchronous=NORMAL). The
// database's own mark, or else the wall clock floor, covers what it lost.
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

// lockMark takes the exclusive lock on byte 0 that guards the high-water
// mark, retrying until ctx ends.
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

// unlockMark drops the lock that lockMark took. Closing the file drops it
// too, so a closed sidecar has nothing to unlock.
func (sc *sidecar) unlockMark() {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	_ = sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk) })
}

// errNotMark is the error of readMark for a file whose first bytes are no
// high-water mark.
var errNotMark = errors.New("it is not a liveness file; move it away (or put the database at another path)")

// readMark reads the high-water mark: 0 in an empty file. A value that no
// token can have (negative, or the largest integer, above which no token
// fits) is an error matching errNotMark, as is a file shorter than a mark.
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

// do runs f on the file's descriptor, which it keeps open meanwhile, or
// returns errSidecarClosed.
func (sc *sidecar) do(f func(fd int) error) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.fd < 0 {
		return errSidecarClosed
	}
	return f(sc.fd)
}

// held reports whether a lock of another open file description is on the
// byte at offset: F_OFD_GETLK, which never blocks and never takes the byte.
// This Store's own lock never counts.
func (sc *sidecar) held(offset int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: offset, Len: 1}
	if err := sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk) }); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// othersLocked reports whether another Store may hold a liveness lock in
// the file: a lock of another open file description is on some byte after
// byte 0 (F_OFD_GETLK over them all), or the test failed.
func (sc *sidecar) othersLocked() bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 1, Len: 0}
	err := sc.do(func(fd int) error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk) })
	return err != nil || lk.Type != unix.F_UNLCK
}

// close closes the file, which drops this Store's lock. It is safe to call
// twice.
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
