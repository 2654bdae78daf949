//go:build linux

package sqlitelease

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// sideFile opens the file at path, next to the database file at db, with
// flags, and gives it the database file's mode and, for root, its owner,
// as SQLite gives them to the -wal and -shm files it creates (os_unix.c:
// findCreateFileMode, robust_open, robustFchown): a database that a group
// shares stays usable by the group. The mode is set whatever the umask, and
// also on a file created before (with 0600, by an older release); a mode or
// owner that cannot be set is left as it is, as SQLite leaves it.
func sideFile(db, path string, flags int) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(db, &st); err != nil {
		return -1, err
	}
	mode := st.Mode & 0o777
	var (
		fd  int
		err error
	)
	for {
		fd, err = unix.Open(path, flags, mode)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return -1, err
	}
	var side unix.Stat_t
	if unix.Fstat(fd, &side) != nil || side.Mode&unix.S_IFMT != unix.S_IFREG {
		return fd, nil // the caller checks the file
	}
	if side.Mode&0o777 != mode {
		_ = unix.Fchmod(fd, mode)
	}
	if os.Geteuid() == 0 && (side.Uid != st.Uid || side.Gid != st.Gid) {
		_ = unix.Fchown(fd, int(st.Uid), int(st.Gid))
	}
	return fd, nil
}
