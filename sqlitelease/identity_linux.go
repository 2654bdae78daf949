//go:build linux

package sqlitelease

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// One file, one path (see the package documentation): each Store holds a
// read lock on the database file at pathByte, in [2^62, 2^62+2^61), far
// above SQLite's lock bytes, and tests that no other Store's lock is on
// another byte of the range; a test and a lock of two Stores that open at
// once cross, so at least one sees the other. Closing any descriptor of the
// file drops every POSIX lock of the process on it, so descriptors live in
// one table per process (dbFiles), closed only when unused (closeUnused).
const (
	pathBytes     = 1 << 62
	pathByteRange = 1 << 61
)

type fileKey struct{ dev, ino uint64 }

// dbFile is a database file that Stores of this process have open.
type dbFile struct {
	stores int                 // Stores that hold it (or are opening it)
	paths  map[int64]*pathLock // by the byte of the path they came through
	extra  []int               // descriptors opened for a path that had one, closed with the others
}

// pathLock is the descriptor, and read lock, of the Stores of one path.
type pathLock struct {
	fd     int
	stores int // the lock is held while this is above 0
}

type fileTable struct {
	mu   sync.Mutex
	m    map[fileKey]*dbFile
	busy []busyHold // see releaseWhen
}

// busyHold is the hold of a closed Store with connections still open.
type busyHold struct {
	h    *fileHold
	idle func() bool
}

var dbFiles = fileTable{m: make(map[fileKey]*dbFile)}

// fileHold is a Store's hold on its database file.
type fileHold struct {
	key fileKey
	at  int64 // the byte of the path it came through
}

// holdFile opens the database file at real (symbolic links resolved),
// creating it with mode 0600, and holds it for a Store, refusing
// (ErrSecondPath) a file with a second name or held through another path.
func holdFile(path, real string) (*fileHold, error) {
	var dir unix.Stat_t
	if err := unix.Stat(filepath.Dir(real), &dir); err != nil {
		return nil, fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	at := pathByte(dir, filepath.Base(real))

	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	h, fd, err := dbFiles.hold(real, at)
	if err != nil {
		return nil, createError(path, err)
	}
	if err := h.check(path, real, fd); err != nil {
		dbFiles.release(h)
		return nil, err
	}
	return h, nil
}

// check refuses a file that is not a regular file, has a second name, or
// has the lock of a Store that came through another path.
func (h *fileHold) check(path, real string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("sqlitelease: open %q: %q is not a regular file (mode %#o)", path, real, st.Mode)
	case st.Nlink > 1:
		return fmt.Errorf("sqlitelease: open %q: %w", path, linksError(real, uint64(st.Nlink)))
	}
	for _, r := range [][2]int64{{pathBytes, h.at}, {h.at + 1, pathBytes + pathByteRange}} {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: r[0], Len: r[1] - r[0]}
		if lk.Len == 0 {
			continue
		}
		if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
			return fmt.Errorf("sqlitelease: open %q: test the locks on the database file: %w", path, err)
		}
		if lk.Type != unix.F_UNLCK {
			return fmt.Errorf("sqlitelease: open %q: another Store has the file open through another directory or name "+
				"(a bind mount of the file alone, as docker run -v /host/app.db:/data/app.db makes, or a file moved elsewhere "+
				"while a process had it open), and SQLite keeps a write-ahead log next to each: %w", path, ErrSecondPath)
		}
	}
	return nil
}

// hold returns a hold on real for the path byte at, and the path's
// descriptor, reusing that of a Store that came the same way. The caller
// holds t.mu.
func (t *fileTable) hold(real string, at int64) (*fileHold, int, error) {
	var p *pathLock
	var st unix.Stat_t
	if unix.Stat(real, &st) == nil {
		key := fileKey{uint64(st.Dev), st.Ino}
		if f := t.m[key]; f != nil {
			p = f.paths[at]
		}
	}
	if p == nil {
		fd, err := openDB(real)
		if err != nil {
			return nil, -1, err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd) // of no Store of this process, or the stat above would have found it
			return nil, -1, err
		}
		key := fileKey{uint64(st.Dev), st.Ino}
		f := t.m[key]
		if f == nil {
			f = &dbFile{paths: make(map[int64]*pathLock)}
			t.m[key] = f
		}
		if p = f.paths[at]; p == nil {
			p = &pathLock{fd: fd}
			f.paths[at] = p
		} else {
			// The path came to name this file after the stat above: keep
			// the descriptor, whose close would drop the locks of its Stores.
			f.extra = append(f.extra, fd)
		}
	}
	h := &fileHold{fileKey{uint64(st.Dev), st.Ino}, at}
	f := t.m[h.key]
	f.stores++
	if p.stores == 0 {
		lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: at, Len: 1}
		if err := unix.FcntlFlock(uintptr(p.fd), unix.F_OFD_SETLK, &lk); err != nil {
			f.stores--
			t.tidy()
			return nil, -1, fmt.Errorf("lock the database file (the filesystem must support open file description locks): %w", err)
		}
	}
	p.stores++
	return h, p.fd, nil
}

func openDB(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// pathByte returns the byte that stands for the name base in directory dir.
func pathByte(dir unix.Stat_t, base string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%d/%s", dir.Dev, dir.Ino, base)
	return pathBytes + int64(h.Sum64()%pathByteRange)
}

// release ends the hold; it is safe on a nil hold.
func (h *fileHold) release() {
	if h == nil {
		return
	}
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	dbFiles.release(h)
}

// releaseWhen ends the hold once idle reports the Store's connections all
// closed (a job may still write through one), asked again at later Opens
// and Closes. It is safe on a nil hold.
func (h *fileHold) releaseWhen(idle func() bool) {
	if h == nil {
		return
	}
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	dbFiles.busy = append(dbFiles.busy, busyHold{h, idle})
	dbFiles.tidy()
}

func (t *fileTable) release(h *fileHold) {
	t.drop(h)
	t.tidy()
}

// drop ends h: the last Store of a path drops its lock. The caller holds t.mu.
func (t *fileTable) drop(h *fileHold) {
	f := t.m[h.key]
	p := f.paths[h.at]
	if p.stores--; p.stores == 0 {
		lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: h.at, Len: 1}
		_ = unix.FcntlFlock(uintptr(p.fd), unix.F_OFD_SETLK, &lk)
	}
	f.stores--
}

// tidy ends the idle busy holds and closes unused descriptors. The caller
// holds t.mu.
func (t *fileTable) tidy() {
	t.busy = slices.DeleteFunc(t.busy, func(b busyHold) bool {
		if !b.idle() {
			return false
		}
		t.drop(b.h)
		return true
	})
	t.closeUnused()
}

// closeUnused closes the descriptors of the files no Store holds, unless a
// connection of this process locks the file (the job's own *sql.DB): the
// close would drop its locks. The caller holds t.mu.
func (t *fileTable) closeUnused() {
	var locked map[fileKey]bool
	for key, f := range t.m {
		if f.stores > 0 {
			continue
		}
		if locked == nil {
			var err error
			if locked, err = posixLocked(); err != nil {
				return // keep them all
			}
		}
		if locked[key] {
			continue
		}
		for _, p := range f.paths {
			_ = unix.Close(p.fd)
		}
		for _, fd := range f.extra {
			_ = unix.Close(fd)
		}
		delete(t.m, key)
	}
}

// posixLocked returns the files this process holds POSIX locks on, from
// /proc/locks.
func posixLocked() (map[fileKey]bool, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	locked := make(map[fileKey]bool)
	for line := range strings.Lines(string(b)) {
		// "1: POSIX  ADVISORY  READ 1234 fd:00:5678 1073741826 1073742335";
		// a process waiting for a lock has "->" after the number.
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "POSIX" || f[4] != pid {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			locked[fileKey{unix.Mkdev(uint32(major), uint32(minor)), ino}] = true
		}
	}
	return locked, nil
}

// inPlace reports whether real still has the directory the hold came
// through: a directory put in its place lacks the file's -wal and -shm.
func (h *fileHold) inPlace(real string) bool {
	var dir unix.Stat_t
	return unix.Stat(filepath.Dir(real), &dir) == nil && pathByte(dir, filepath.Base(real)) == h.at
}

func (h *fileHold) is(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fileKey{uint64(st.Dev), st.Ino} == h.key
}

func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
