package sqlitelease

// holderState is what the poller knows of one holder whose leases are
// watched.
type holderState struct {
	gone bool // no lock was on the holder's byte; guarded by watchState.mu
}

// syncHolders makes holders hold the holders that watched leases have,
// keeping what is known of those it already held. Only the poller calls it.
func (w *watchState) syncHolders() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.holdersStale {
		return
	}
	w.holdersStale = false
	want := make(map[holderID]bool)
	for _, wl := range w.leases {
		if wl.holder.known() {
			want[wl.holder] = true
		}
	}
	for id := range w.holders {
		if !want[id] {
			delete(w.holders, id)
		}
	}
	for id := range want {
		if w.holders[id] == nil {
			w.holders[id] = &holderState{}
		}
	}
}

// testHolders tests the liveness byte of each holder in holders not yet
// found gone, once: F_OFD_GETLK, one non-blocking system call of about a
// microsecond. (A blocking F_OFD_SETLKW cannot be interrupted in a Go
// program: the runtime installs every signal handler with SA_RESTART, and
// the kernel restarts a lock wait after the handler, so Close could neither
// end nor wait for a goroutine blocked in one.) When no lock is on a byte,
// the holder's process died or its Store closed: it marks the holder gone
// and delivers the zero Lease to the subscribers of that holder's leases,
// so that their candidates try again at once (and take the leases over).
// Only the poller calls it, once per wake-up.
func (w *watchState) testHolders() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	for id, h := range w.holders {
		if h.gone {
			continue
		}
		w.liveTests++
		if held, err := w.live.held(id.offset); err != nil || held {
			continue
		}
		h.gone = true
		for _, wl := range w.leases {
			if wl.holder == id {
				w.offerAll(wl)
			}
		}
	}
}

// forgetHolders forgets every holder, for the poller's end.
func (w *watchState) forgetHolders() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.holders)
	w.holdersStale = true
}
