package sqlitelease

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// WatchLease implements [elector.LeaseWatcher]. The channel receives the
// current lease of name whenever this Store sees a new state of it: at once
// for a release through this Store, on Linux at once (otherwise within
// about one watch interval, see [WithWatchInterval]) for a release or a new
// term by another Store or process, and at the store's next read for a
// renewal. The zero Lease means that the lease is free, or, on Linux, that
// its holder's process is gone (it died, or closed its Store without
// clearing its record): a TryAcquire through this Store then takes it over
// at once. The store reads the lease at least every `every` (every watch
// interval if every is shorter). The channel holds the latest state only
// and is never closed; after [Store.Close] it never receives. The caller
// must call stop once it no longer watches.
//
// While anyone watches, one goroutine per Store reads two counters that
// triggers keep in the file, on a connection of its own: the token
// high-water mark, which grows with every new term, and the count of
// released terms. When one changed, or the shortest every passed, it reads
// the watched leases that changed, all in one statement; a file where
// leases are only renewed costs one such read per every. On Linux, the
// same goroutine also tests the liveness lock of each distinct holding
// Store whose leases are watched (see the package documentation), and it
// wakes when the liveness file tells it to: every Store touches the file
// after a commit that begins or ends a term, and the kernel reports every
// close of the file, which a dying process does (inotify, one descriptor
// and one more goroutine per watching Store). Otherwise it wakes every
// watch interval, which is thus what a change costs to be seen when the
// file cannot wake it: inotify refused (logged once), the -live file
// replaced since this Store opened it, or a change by a release of this
// package that does not touch the file. It stops when the last watcher
// stops, or at [Store.Close].
func (s *Store) WatchLease(name string, every time.Duration) (states <-chan elector.Lease, stop func()) {
	ch := make(chan elector.Lease, 1)
	return ch, s.watch.add(name, &subscriber{states: ch, every: max(every, time.Nanosecond)})
}

// WatchRelease implements [elector.ReleaseWatcher], for callers that know
// only that interface: the channel receives a value whenever WatchLease
// would send the zero Lease (the lease is free, or its holder's process is
// gone). Spurious values are possible.
func (s *Store) WatchRelease(name string) (released <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	return ch, s.watch.add(name, &subscriber{released: ch})
}

// watchState holds the lease watchers of a Store and their goroutine, the
// poller, which reads the watched leases and tests the liveness of their
// holders.
type watchState struct {
	interval time.Duration
	live     *sidecar // nil without liveness locks; set by Open

	// lifeMu serializes starting and stopping the poller; the poller never
	// takes it, so stopping may wait for the poller while holding it.
	lifeMu sync.Mutex
	poller *poller // guarded by lifeMu; nil while nobody watches

	eventsWarned sync.Once // the poller says once that it cannot use inotify

	// kick (capacity 1) wakes the poller early: a lease it has not read
	// yet is watched.
	kick chan struct{}

	mu      sync.Mutex // guards what follows; never held while waiting for a goroutine
	db      *sql.DB    // the pool of the poller's connection
	dbGen   uint64     // counts the changes of db (see setDB)
	closed  bool
	leases  map[string]*watchedLease
	subs    int                   // subscribers in leases
	unread  int                   // leases not read yet
	everies map[time.Duration]int // the every of each WatchLease subscriber, counted
	reread  bool                  // read at the next poll even if the file did not change
	// holders has each holder that watched leases have (whose liveness
	// this Store can test); only the poller adds or removes holders.
	holders      map[holderID]*holderState
	holdersStale bool   // the holders wanted may differ from holders
	releases     uint64 // counts notify calls
	reads        uint64 // counts the reads of changedSQL
	polls        uint64 // counts the poller's wake-ups
	liveTests    uint64 // counts the tests of holders' liveness bytes
}

// watchedLease is one watched lease name: its subscribers and the state of
// the lease as the poller last read it.
type watchedLease struct {
	json []byte // the name as a JSON string
	subs map[*subscriber]struct{}
	read bool // row, lease and holder are set
	// row is the token and version of the lease's row, released or not
	// (zero if there is none): what changedSQL compares.
	row    rowState
	lease  elector.Lease // the unreleased term; zero if free
	holder holderID      // the holder's Store, if this Store can test its liveness
	// released is the notify count of the last local release of the lease:
	// a read that began before it may deliver an older state, so it is
	// not applied.
	released uint64
}

type rowState struct{ token, version uint64 }

// state is a state of a lease as subscribers tell them apart: a term held
// (its token and version), a term released (its token: each term is
// released once), or a term whose holder is gone. Telling releases apart
// matters: a candidate that got one zero Lease and then found the lease
// taken by its TryAcquire must get the next release too, even if the
// poller never read the term in between.
type state struct {
	token, version uint64
	kind           stateKind
}

type stateKind uint8

const (
	held stateKind = iota
	free
	gone
)

// stateOf returns the state of wl to deliver, and the lease that
// subscribers get for it: the zero Lease if it is free or its holder is
// gone. The caller holds mu.
func (w *watchState) stateOf(wl *watchedLease) (state, elector.Lease) {
	switch {
	case wl.lease.Token == 0:
		return state{token: wl.row.token, kind: free}, elector.Lease{}
	case w.holders[wl.holder] != nil && w.holders[wl.holder].gone:
		return state{wl.lease.Token, wl.lease.Version, gone}, elector.Lease{}
	}
	return state{wl.lease.Token, wl.lease.Version, held}, wl.lease
}

// offerAll offers the state of wl to its subscribers. The caller holds mu.
func (w *watchState) offerAll(wl *watchedLease) {
	st, l := w.stateOf(wl)
	for sub := range wl.subs {
		sub.offer(st, l)
	}
}

// subscriber is one WatchLease or WatchRelease caller.
type subscriber struct {
	states   chan elector.Lease // WatchLease
	released chan struct{}      // WatchRelease
	every    time.Duration      // WatchLease: the longest time between reads
	sent     bool               // last is set
	last     state              // the state the subscriber last got
}

// offer hands l, the lease for st, to the subscriber unless st is the
// state it last got, keeping only the latest lease in its channel. The
// caller holds mu, so sends never block: the buffer is empty after the
// drain and only offer sends.
func (sub *subscriber) offer(st state, l elector.Lease) {
	if sub.sent && st == sub.last {
		return
	}
	sub.sent, sub.last = true, st
	if sub.released != nil {
		if l.Token == 0 {
			select {
			case sub.released <- struct{}{}:
			default:
			}
		}
		return
	}
	select {
	case <-sub.states:
	default:
	}
	sub.states <- l
}

func (w *watchState) init(db *sql.DB, interval time.Duration) {
	w.db, w.interval = db, interval
	w.kick = make(chan struct{}, 1)
	w.leases = make(map[string]*watchedLease)
	w.everies = make(map[time.Duration]int)
	w.holders = make(map[holderID]*holderState)
}

// add subscribes sub to the lease name and returns its stop function.
func (w *watchState) add(name string, sub *subscriber) (stop func()) {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return func() {}
	}
	wl := w.leases[name]
	if wl == nil {
		enc, _ := json.Marshal(name) // a string always encodes
		wl = &watchedLease{json: enc, subs: make(map[*subscriber]struct{})}
		w.leases[name] = wl
		w.unread++
	}
	wl.subs[sub] = struct{}{}
	w.subs++
	if sub.states != nil {
		w.everies[sub.every]++
	}
	if wl.read {
		st, l := w.stateOf(wl)
		sub.offer(st, l)
	} else {
		w.wake()
	}
	w.mu.Unlock()
	if w.poller == nil {
		w.poller = startPoller(w.run)
	}
	var once sync.Once
	return func() { once.Do(func() { w.remove(name, wl, sub) }) }
}

func (w *watchState) remove(name string, wl *watchedLease, sub *subscriber) {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	if _, ok := wl.subs[sub]; ok {
		delete(wl.subs, sub)
		w.subs--
		if sub.states != nil {
			if w.everies[sub.every]--; w.everies[sub.every] == 0 {
				delete(w.everies, sub.every)
			}
		}
	}
	if len(wl.subs) == 0 && w.leases[name] == wl {
		delete(w.leases, name)
		if !wl.read {
			w.unread--
		}
		if wl.holder.known() {
			w.holdersStale = true // its holder may be waited for no more
		}
	}
	idle := w.subs == 0
	w.mu.Unlock()
	if idle && w.poller != nil {
		w.poller.stop()
		w.poller = nil
	}
}

// close stops the goroutines and keeps them from starting again.
func (w *watchState) close() {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	if w.poller != nil {
		w.poller.stop()
		w.poller = nil
	}
}

// setDB makes the poller read through db, the pool of the file that the
// Store reopened, from its next wake-up, which comes at once.
func (w *watchState) setDB(db *sql.DB) {
	w.mu.Lock()
	w.db, w.dbGen, w.reread = db, w.dbGen+1, true
	w.mu.Unlock()
	w.wake()
}

// source returns the pool of the poller's connection and its generation.
func (w *watchState) source() (*sql.DB, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.db, w.dbGen
}

// wake wakes the poller without blocking.
func (w *watchState) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// notify tells the subscribers of the named lease that its term token
// was just released through this Store.
func (w *watchState) notify(name string, token uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releases++
	if wl := w.leases[name]; wl != nil {
		wl.released = w.releases
		for sub := range wl.subs {
			sub.offer(state{token: token, kind: free}, elector.Lease{})
		}
	}
}

// poller is the store's watching goroutine.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startPoller(run func(ctx context.Context)) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		run(ctx)
	}()
	return p
}

// stop stops the goroutine and waits for it.
func (p *poller) stop() {
	p.cancel()
	<-p.done
}

// marksSQL reads the two counters that tell a watching Store that a term
// began or ended (see schema version 4): the token high-water mark and the
// count of released terms. Renewals change neither.
const marksSQL = `SELECT
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0),
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + releasesKey + `'), 0)`

// marks is what marksSQL reads.
type marks struct{ highWater, releases int64 }

// changedSQL reads the watched leases whose row changed: ?1 is a JSON
// object that maps each watched name to the "token.version" of its row as
// last read ("" if it had none, "?" if it was never read). It returns the
// name, the row's token, version and released flag, then the other columns
// getSQL reads (all NULL if there is no row). An object, not an array of
// arrays: json_each then hands out the name and the state without parsing
// each element again.
const changedSQL = `SELECT j.key, l.token, l.version, l.released, l.holder, l.ttl_ms, l.written_at,
	CASE WHEN l.live_version = l.version THEN l.live_file END,
	CASE WHEN l.live_version = l.version THEN l.live_offset END
FROM json_each(?1) AS j LEFT JOIN ` + leaseTable + ` AS l ON l.name = j.key
WHERE coalesce(l.token || '.' || l.version, '') != j.value`

// reader is the poller's connection, with its statements.
type reader struct {
	conn           *sql.Conn
	marks, changed *sql.Stmt
}

func newReader(ctx context.Context, db *sql.DB) (*reader, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &reader{conn: c}
	if r.marks, err = c.PrepareContext(ctx, marksSQL); err == nil {
		r.changed, err = c.PrepareContext(ctx, changedSQL)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *reader) close() {
	for _, st := range []*sql.Stmt{r.marks, r.changed} {
		if st != nil {
			_ = st.Close()
		}
	}
	_ = r.conn.Close()
}

// run is the poller. Every watch interval, when woken, and on Linux when
// another Store began or ended a term or closed the liveness file (see
// fileEvents), it reads the marks; when they changed since its last read
// of the watched leases (or a lease is not read yet, or the shortest every
// has passed), it reads the watched leases that changed and delivers their
// new states. Then it tests the liveness of the holders of the watched
// leases, each once. The marks are read before the leases, so that a read
// never covers a release that the marks it records do not. Errors are
// ignored (the connection is replaced): the elector's own reads remain the
// correctness path.
func (w *watchState) run(ctx context.Context) {
	defer w.forgetHolders()
	events, err := w.live.events()
	if err != nil {
		w.eventsWarned.Do(func() {
			slog.Warn("sqlitelease: cannot watch the liveness file; changes by other processes are seen every watch interval",
				"interval", w.interval, "err", err)
		})
	}
	defer events.stop()
	timer := time.NewTimer(w.interval)
	defer timer.Stop()
	var p pollState
	defer p.closeReader()
	var retests []time.Time // when to test the holders again after a close
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.kick:
		case <-events.wait():
			if events.tookClose() {
				retests = retests[:0]
				for _, d := range closeRetests {
					retests = append(retests, time.Now().Add(d))
				}
			}
		}
		if err := w.poll(ctx, &p); err != nil {
			p.closeReader()
		}
		w.syncHolders()
		w.testHolders()
		next, now := w.interval, time.Now()
		for len(retests) > 0 && !retests[0].After(now) {
			retests = retests[1:]
		}
		if len(retests) > 0 {
			next = min(next, retests[0].Sub(now))
		}
		timer.Reset(next)
	}
}

// closeRetests are the delays after a process closed the liveness file at
// which the poller tests the holders again: the kernel reports the close a
// moment before it drops the locks of the closing descriptor.
var closeRetests = []time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond}

// pollState is what the poller keeps between its reads of the file.
type pollState struct {
	r        *reader // nil until opened, and after an error
	gen      uint64  // the generation of the pool r is from
	last     marks   // at the last read of the leases
	lastRead time.Time
	buf      []byte // scratch space for read
}

func (p *pollState) closeReader() {
	if p.r != nil {
		p.r.close()
		p.r = nil
	}
}

// poll reads the marks, and the watched leases if they changed or a read
// is due.
func (w *watchState) poll(ctx context.Context, p *pollState) error {
	db, gen := w.source()
	if p.r != nil && p.gen != gen {
		p.closeReader()
	}
	if p.r == nil {
		var err error
		if p.r, err = newReader(ctx, db); err != nil {
			return err
		}
		p.gen = gen
	}
	var m marks
	if err := p.r.marks.QueryRowContext(ctx).Scan(&m.highWater, &m.releases); err != nil {
		return err
	}
	if m == p.last && !w.due(time.Since(p.lastRead)) {
		return nil
	}
	var err error
	if p.buf, err = w.read(ctx, p.r, p.buf); err != nil {
		return err
	}
	p.last, p.lastRead = m, time.Now()
	return nil
}

// due reports whether the poller must read although the file did not
// change, since its last read was since ago.
func (w *watchState) due(since time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unread > 0 || w.reread {
		return true
	}
	for every := range w.everies {
		if since >= every {
			return true
		}
	}
	return false
}

// read reads the watched leases that changed since they were last read,
// and delivers them. buf is scratch space, returned for reuse.
func (w *watchState) read(ctx context.Context, r *reader, buf []byte) ([]byte, error) {
	buf, releases := w.known(buf[:0])
	rows, err := r.changed.QueryContext(ctx, string(buf)) // text: a blob would be JSONB
	if err != nil {
		return buf, err
	}
	defer rows.Close()
	type change struct {
		name   string
		row    rowState
		lease  elector.Lease
		holder holderID
	}
	var changes []change
	for rows.Next() {
		var (
			c                                     change
			released                              sql.NullBool
			holder, liveFile                      sql.NullString
			token, version, ttl, written, liveOff sql.NullInt64
		)
		if err := rows.Scan(&c.name, &token, &version, &released, &holder, &ttl, &written, &liveFile, &liveOff); err != nil {
			return buf, err
		}
		c.row = rowState{uint64(token.Int64), uint64(version.Int64)}
		if token.Valid && !released.Bool {
			c.lease = elector.Lease{Name: c.name, Holder: holder.String, Token: c.row.token,
				Version: c.row.version, TTL: fromMillis(ttl.Int64), Written: time.UnixMilli(written.Int64)}
			c.holder = scanLive(liveFile, liveOff)
		}
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return buf, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reread = false
	w.reads++
	for _, c := range changes {
		wl := w.leases[c.name]
		switch {
		case wl == nil:
			continue // no longer watched
		case wl.released > releases:
			// Released through this Store since the read began: the state
			// read may be older than the zero Lease notify delivered.
			w.reread = true
			continue
		case !wl.read:
			wl.read = true
			w.unread--
		}
		holder := holderID{}
		if c.lease.Token != 0 && w.live.testable(c.holder) {
			holder = c.holder
		}
		if holder != wl.holder {
			wl.holder = holder
			w.holdersStale = true
		}
		wl.row, wl.lease = c.row, c.lease
		w.offerAll(wl)
	}
	return buf, nil
}

// known appends to buf the argument of changedSQL: the watched leases and
// their states as last read. It also returns the count of local releases
// so far.
func (w *watchState) known(buf []byte) ([]byte, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf = append(buf, '{')
	for _, wl := range w.leases {
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, wl.json...)
		switch {
		case !wl.read:
			buf = append(buf, `:"?"`...)
		case wl.row.token == 0:
			buf = append(buf, `:""`...)
		default:
			buf = append(buf, `:"`...)
			buf = strconv.AppendUint(buf, wl.row.token, 10)
			buf = append(buf, '.')
			buf = strconv.AppendUint(buf, wl.row.version, 10)
			buf = append(buf, '"')
		}
	}
	return append(buf, '}'), w.releases
}
