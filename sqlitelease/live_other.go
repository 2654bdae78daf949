//go:build !linux

package sqlitelease

// openSidecar returns no liveness file: outside Linux there are no open file
// description locks, and candidates apply the elapsed-time rule alone.
func openSidecar(string) (*sidecar, error) { return nil, nil }

// held is never called without a sidecar; it claims the holder alive.
func (sc *sidecar) held(int64) (bool, error) { return true, nil }

// close has nothing to close.
func (sc *sidecar) close() error { return nil }
