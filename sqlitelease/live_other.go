//go:build !linux

package sqlitelease

import (
	"context"
	"time"
)

// openSidecar returns no liveness file: outside Linux there are no open file
// description locks, and candidates apply the elapsed-time rule alone.
func openSidecar(string) (*sidecar, error) { return nil, nil }

// held is never called without a sidecar; it claims the holder alive.
func (sc *sidecar) held(int64) (bool, error) { return true, nil }

// withMark is never called without a sidecar: outside Linux new tokens
// floor at the wall clock and the file's own high-water mark alone.
func (sc *sidecar) withMark(_ context.Context, issue func(mark int64) (int64, error)) error {
	_, err := issue(0)
	return err
}

// othersLocked is never called without a sidecar.
func (sc *sidecar) othersLocked() bool { return true }

// close has nothing to close.
func (sc *sidecar) close() error { return nil }

// defaultWatchInterval is DefaultWatchInterval outside Linux, where only
// the interval wakes Notify.
const defaultWatchInterval = 20 * time.Millisecond

// fileEvents is empty: outside Linux Notify relies on its interval.
type fileEvents struct{}

func (sc *sidecar) events() (*fileEvents, error) { return nil, nil }
func (ev *fileEvents) wait() <-chan struct{}     { return nil }
func (ev *fileEvents) tookClose() bool           { return false }
func (ev *fileEvents) stop()                     {}

// touch has nobody to wake.
func (sc *sidecar) touch() {}
