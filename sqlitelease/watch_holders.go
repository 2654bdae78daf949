package sqlitelease

import (
	"context"
	"time"
)

// holderWatch is the goroutine that tests the liveness byte of one holder
// whose leases are watched.
type holderWatch struct {
	*poller
	gone bool // no lock is on the holder's byte; guarded by watchState.mu
}

// syncHolders starts a holder watch for every holder that watched leases
// have and stops the others. Only the poller calls it.
func (w *watchState) syncHolders() {
	w.mu.Lock()
	if !w.holdersStale {
		w.mu.Unlock()
		return
	}
	w.holdersStale = false
	want := make(map[holderID]bool)
	for _, wl := range w.leases {
		if wl.holder.known() {
			want[wl.holder] = true
		}
	}
	var unwanted []*holderWatch
	for id, h := range w.holders {
		if !want[id] {
			unwanted = append(unwanted, h)
			delete(w.holders, id)
		}
	}
	for id := range want {
		if w.holders[id] == nil {
			h := &holderWatch{}
			h.poller = startPoller(func(ctx context.Context) { w.watchHolder(ctx, id, h) })
			w.holders[id] = h
		}
	}
	w.mu.Unlock()
	for _, h := range unwanted {
		h.stop()
	}
}

// stopHolders stops every holder watch, for the poller's end.
func (w *watchState) stopHolders() {
	w.mu.Lock()
	all := w.holders
	w.holders = make(map[holderID]*holderWatch)
	w.mu.Unlock()
	for _, h := range all {
		h.stop()
	}
}

// watchHolder tests the byte of the holder id every liveInterval. A
// blocking F_OFD_SETLKW cannot be interrupted in a Go program (see
// liveInterval), so it polls F_OFD_GETLK, one non-blocking system call.
// When no lock is on the byte, the holder's process died or its Store
// closed: it marks h gone, delivers the zero Lease to the subscribers of
// the leases of that holder, so that their candidates try again at once
// (and take the leases over), and ends.
func (w *watchState) watchHolder(ctx context.Context, id holderID, h *holderWatch) {
	ticker := time.NewTicker(liveInterval)
	defer ticker.Stop()
	for {
		if held, err := w.live.held(id.offset); err == nil && !held {
			w.holderGone(id, h)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// holderGone marks h, the watch of the holder id, gone, and delivers the
// zero Lease to the subscribers of the leases that holder holds.
func (w *watchState) holderGone(id holderID, h *holderWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holders[id] != h {
		return // stopped meanwhile
	}
	h.gone = true
	for _, wl := range w.leases {
		if wl.holder == id {
			w.offerAll(wl)
		}
	}
}
