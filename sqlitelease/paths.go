package sqlitelease

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// ErrSecondPath is returned by [Open], and by the writes of a [Store], for a
// database file with a second name (a hard link) or that another Store has
// open through another directory (a bind mount of the file alone); a Renew's
// or fenced write's error also matches [elector.ErrLeaseLost].
var ErrSecondPath = errors.New("the database file is reachable through a second path; " +
	"mount or share the directory that holds it, not the file, and give it one name")

// maxPath is SQLite's longest database path: MAX_PATHNAME less "-journal".
const maxPath = 512 - len("-journal")

const maxSymlinks = 40

// absPath makes path absolute from the kernel's working directory (getcwd,
// not $PWD), without cleaning a ".." ("link/.." is not ".").
func absPath(path string) (string, error) {
	if runtime.GOOS == "windows" {
		return filepath.Abs(path) // Windows itself takes ".." by the letters
	}
	if !filepath.IsAbs(path) {
		wd, err := syscall.Getwd()
		if err != nil {
			return "", err
		}
		path = wd + string(filepath.Separator) + path
	}
	if slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "..") {
		return path, nil
	}
	return filepath.Clean(path), nil
}

// resolvePath resolves every symbolic link of abs as the kernel does, the
// last one even if it dangles: where SQLite keeps the side files.
func resolvePath(path, abs string) (string, error) {
	for range maxSymlinks {
		dir, base := filepath.Split(abs) // not filepath.Dir, which cleans
		if len(dir) > 1 {
			dir = dir[:len(dir)-1]
		}
		if err := checkDir(path, dir); err != nil {
			return "", err
		}
		dir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", fmt.Errorf("sqlitelease: open %q: %w", path, err)
		}
		p := filepath.Join(dir, base) // dir has no links, so a ".." base is its parent
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil // a missing file is created here; SQLite reports other errors
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("sqlitelease: open %q: %w", path, err)
		}
		if !filepath.IsAbs(target) {
			target = dir + string(filepath.Separator) + target
		}
		abs = target
	}
	return "", fmt.Errorf("sqlitelease: open %q: more than %d symbolic links: %w", path, maxSymlinks, syscall.ELOOP)
}

// checkResolved refuses a resolution real that does not name the file abs
// names (a link into another mount namespace, such as /proc/PID/root).
func checkResolved(path, abs, real string) error {
	want, err := os.Stat(abs)
	if err != nil {
		return nil // nothing there yet, or an error that opening it reports
	}
	if got, err := os.Stat(real); err == nil && os.SameFile(want, got) {
		return nil
	}
	return fmt.Errorf("sqlitelease: open %q: its symbolic links resolve to %q, which is not the file the path names "+
		"(a link such as /proc/PID/root leads into another process's view of the files): open the file by its own path", path, real)
}

func checkDir(path, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlitelease: open %q: the directory %q does not exist: %w", path, dir, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("sqlitelease: open %q: a parent of %q is not a directory: %w", path, dir, err)
	case err != nil:
		return fmt.Errorf("sqlitelease: open %q: directory %q: %w", path, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("sqlitelease: open %q: %q is not a directory", path, dir)
	}
	return nil
}

func checkLength(path, real string) error {
	if len(real) <= maxPath {
		return nil
	}
	resolved := ""
	if real != path {
		resolved = fmt.Sprintf(" (as %q)", real)
	}
	return fmt.Errorf("sqlitelease: open %q: the path%s is %d bytes long, over SQLite's limit of %d "+
		"(its 512-byte maximum path less the 8 of the -journal suffix): move the file to a directory with a shorter path",
		path, resolved, len(real), maxPath)
}

func linksError(real string, n uint64) error {
	return fmt.Errorf("the file has %d names (hard links; find them with find / -xdev -samefile %q), "+
		"and SQLite keeps a write-ahead log next to each: %w", n, real, ErrSecondPath)
}

func createError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("sqlitelease: open %q: the file or its directory is not writable: %w", path, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("sqlitelease: open %q: the path is a directory: %w", path, err)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("sqlitelease: open %q: the filesystem is read-only: %w", path, err)
	}
	return fmt.Errorf("sqlitelease: open %q: %w", path, err)
}
