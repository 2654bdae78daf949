//go:build linux

package sqlitelease

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sidecarAttempts is how many random offsets openSidecar tries: one is
// taken by another Store only if 62 random bits collide.
const sidecarAttempts = 8

// openSidecar opens (creating it with mode 0600) the liveness file next to
// the database file at the absolute path abs, as SQLite places its -wal
// and -shm files (next to the file a symbolic link points to), and locks a
// byte of it at a random offset in [1, 2^62). It refuses, with an error
// naming the file, one that is a symbolic link, not a regular file, not
// empty (this package never writes to it, so it belongs to something else),
// not writable, or that cannot be locked.
func openSidecar(abs string) (*sidecar, error) {
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	path := abs + "-live"
	var (
		fd  int
		err error
	)
	for {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
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
	if st.Size != 0 {
		return fmt.Errorf("liveness file %q holds %d bytes, but sqlitelease keeps it empty: it is not a liveness file; "+
			"move it away (or put the database at another path)", sc.path, st.Size)
	}
	sc.file = fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	for range sidecarAttempts {
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

// held reports whether a lock of another open file description is on the
// byte at offset: F_OFD_GETLK, which never blocks and never takes the byte.
// This Store's own lock never counts.
func (sc *sidecar) held(offset int64) (bool, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.fd < 0 {
		return false, errSidecarClosed
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: offset, Len: 1}
	if err := unix.FcntlFlock(uintptr(sc.fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
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
