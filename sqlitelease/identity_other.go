//go:build !linux

package sqlitelease

import "os"

// fileHold is nothing outside Linux, where a second path to the file goes
// undetected.
type fileHold struct{}

// holdFile creates the file at real with mode 0600 if it does not exist.
func holdFile(path, real string) (*fileHold, error) {
	f, err := os.OpenFile(real, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, createError(path, err)
	}
	if err := f.Close(); err != nil {
		return nil, createError(path, err)
	}
	return nil, nil
}

func (h *fileHold) release()                {}
func (h *fileHold) releaseWhen(func() bool) {}
func (h *fileHold) is(os.FileInfo) bool     { return true }
func (h *fileHold) inPlace(string) bool     { return true }

// links reports one link: outside Linux the count is not checked.
func links(os.FileInfo) uint64 { return 1 }
