package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// DefaultSeats is the default most members of a group.
const DefaultSeats = 64

// MaxSeats is the most seats a group may have: each is read every
// RetryInterval.
const MaxSeats = 1024

// Config sets the identity and timings of a [Group]. Only Name is required.
type Config struct {
	// Name is the group: the replicas that run the same leases in one
	// store. Printable UTF-8, short enough that its seat names stay within
	// [elector.MaxNameLen].
	Name string
	// Holder is this replica's holder name; default [elector.DefaultHolder].
	Holder string
	// TTL is the TTL of the membership seat, and how long a member whose
	// seat stopped changing still counts; default [elector.DefaultTTL].
	TTL time.Duration
	// RetryInterval is how often the group reads its seats and leases
	// (jittered), at most TTL/2; default [elector.DefaultRetryInterval].
	RetryInterval time.Duration
	// Seats is the most members; default DefaultSeats, at most MaxSeats.
	Seats int
	// NoBalance keeps and lists the members but balances nothing: first
	// come, as without a group. Drain and Handoff still work.
	NoBalance bool
	// Logger receives Info for join, leave and drain, and Debug for each
	// yield; default slog.Default().
	Logger *slog.Logger
}

// seatPrefix starts the lease name of every seat of every group.
const seatPrefix = "leaderaware.group/"

// seatName is the lease name of seat i of the group name.
func seatName(name string, i int) string {
	return seatPrefix + name + "/seat/" + strconv.Itoa(i)
}

// withDefaults returns c with zero fields set to their defaults, or an
// error naming the first bad value.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		return c, errors.New("placement: Config.Name is empty; name the group of replicas that run the same leases, e.g. the app's name")
	}
	if err := elector.ValidateName(c.Name); err != nil {
		return c, fmt.Errorf("placement: Config.Name: %w", err)
	}
	if c.Seats < 0 || c.Seats > MaxSeats {
		return c, fmt.Errorf("placement: Config.Seats %d is out of range; use 1 to %d, or 0 for %d", c.Seats, MaxSeats, DefaultSeats)
	}
	if c.Seats == 0 {
		c.Seats = DefaultSeats
	}
	if longest := seatName(c.Name, c.Seats-1); len(longest) > elector.MaxNameLen {
		return c, fmt.Errorf("placement: Config.Name %.40q… is %d bytes; at most %d fit in its seat names (%d seats)",
			c.Name, len(c.Name), len(c.Name)-(len(longest)-elector.MaxNameLen), c.Seats)
	}
	if c.TTL == 0 {
		c.TTL = elector.DefaultTTL
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = elector.DefaultRetryInterval
	}
	if c.TTL < elector.MinTTL || c.TTL > elector.MaxTTL {
		return c, fmt.Errorf("placement: Config.TTL %v is out of range; use %v to %v, or 0 for %v", c.TTL, elector.MinTTL, elector.MaxTTL, elector.DefaultTTL)
	}
	if c.RetryInterval < elector.MinRetryInterval || c.RetryInterval > c.TTL/2 {
		return c, fmt.Errorf("placement: Config.RetryInterval %v is out of range; use %v to TTL/2 (%v), or 0 for %v",
			c.RetryInterval, elector.MinRetryInterval, c.TTL/2, elector.DefaultRetryInterval)
	}
	if c.Holder == "" {
		c.Holder = elector.DefaultHolder()
	}
	if err := elector.ValidateHolder(c.Holder); err != nil {
		return c, fmt.Errorf("placement: Config.Holder: %w", err)
	}
	if n := len(seatHolder(c.Holder, clock.Wall())); n > elector.MaxNameLen {
		return c, fmt.Errorf("placement: Config.Holder %.40q… is %d bytes; with the join time its seat records, at most %d fit",
			c.Holder, len(c.Holder), len(c.Holder)-(n-elector.MaxNameLen))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// seatHolder is the holder name of a seat: the member's holder and, for
// display, when it joined (Unix milliseconds, by its wall clock).
func seatHolder(holder string, joined time.Time) string {
	return holder + "@" + strconv.FormatInt(joined.UnixMilli(), 10)
}

// parseSeatHolder splits a seat's holder name into the member's holder and
// its join time (zero if the seat was written by something else).
func parseSeatHolder(s string) (holder string, joined time.Time) {
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return s, time.Time{}
	}
	ms, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return s, time.Time{}
	}
	return s[:i], time.UnixMilli(ms)
}

// Group places the leases of one replica of a group; it implements
// [elector.Placer]. Its methods are safe for concurrent use.
type Group struct {
	store elector.Store
	clock clock.Clock // the Store's (clock.Of), which its electors read
	cfg   Config
	seats []string // seat lease names
	// seatHolder is this replica's holder name in its seat.
	seatHolder string
	seatPrefix string    // of this group's seat names, before the number
	joined     time.Time // wall clock, for display
	kick       chan struct{}

	closeMu sync.Mutex // serializes Close
	done    chan struct{}
	cancel  context.CancelFunc
	unwatch func() // stops the store's notifications, if it pushes them

	mu       sync.Mutex
	started  bool
	closed   bool
	leases   []string        // the group's lease names, in the order of Elector
	isLease  map[string]bool // the same
	electors []*elector.LeaseElector
	seatEl   []*elector.LeaseElector // per seat, made when first campaigned for
	seat     elector.Term            // this replica's seat, nil while it has none
	seatIdx  int
	seen     []seen            // per seat, as last read
	holders  map[string]string // lease name → holder, as last read ("" free)
	terms    map[string]*held  // the terms this replica won, by lease name
	reserved map[string]time.Time
	yielded  map[string]time.Time // lease name → when this replica yielded it
	// drainHeld has the leases whose candidate was last held back for a
	// drain: a term won after any other hold, while draining, yields.
	drainHeld map[string]bool
	// gave has the leases this replica yielded to balance, until
	// another member takes one (the last yields were of use) or this
	// replica wins it back (nobody took it: a member counted short does not
	// campaign for it). futile counts those won back in a row; balance
	// yields nothing until pause, RetryInterval·2^futile after the last.
	gave     map[string]bool
	futile   int
	pause    time.Time
	draining bool
	short    map[string]time.Time // holder → since when it is below target while another is above
}

// seen is what this replica last read of a seat: the lease (Token 0 if
// free) and when (by clock.Now) it first saw its Token and Version.
type seen struct {
	lease elector.Lease
	since time.Time
}

// held is a term this replica won for one of the group's leases.
type held struct {
	term    elector.Term
	started time.Time // clock.Now
	yield   chan struct{}
	yielded bool // yield is closed
}

// New returns the group cfg describes, of the replicas that keep their
// leases in s. It validates cfg (errors name the bad value) and starts
// nothing.
func New(s elector.Store, cfg Config) (*Group, error) {
	if s == nil {
		return nil, errors.New("placement: nil Store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Group{
		store:     s,
		clock:     clock.Of(s),
		cfg:       cfg,
		joined:    clock.Of(s).Wall(),
		kick:      make(chan struct{}, 1),
		isLease:   map[string]bool{},
		seatEl:    make([]*elector.LeaseElector, cfg.Seats),
		seen:      make([]seen, cfg.Seats),
		holders:   map[string]string{},
		terms:     map[string]*held{},
		reserved:  map[string]time.Time{},
		yielded:   map[string]time.Time{},
		drainHeld: map[string]bool{},
		gave:      map[string]bool{},
		short:     map[string]time.Time{},
	}
	g.seatHolder = seatHolder(cfg.Holder, g.joined)
	g.seatPrefix = seatName(cfg.Name, 0)[:len(seatName(cfg.Name, 0))-1]
	for i := range cfg.Seats {
		g.seats = append(g.seats, seatName(cfg.Name, i))
	}
	return g, nil
}

// Holder returns this replica's holder name.
func (g *Group) Holder() string { return g.cfg.Holder }

// Config returns the configuration in force, with defaults filled in.
func (g *Group) Config() Config { return g.cfg }

// Elector returns the elector for the lease name in the group's store
// ([elector.New] with cfg.Holder set to the group's holder and cfg.Placer
// to g) and counts name among the group's leases. A cfg.Holder or
// cfg.Placer of another, a name already in the group, or a name in the
// seats' namespace is an error naming the value.
func (g *Group) Elector(name string, cfg elector.Config) (*elector.LeaseElector, error) {
	if cfg.Holder != "" && cfg.Holder != g.cfg.Holder {
		return nil, fmt.Errorf("placement: lease %q: Config.Holder %q is not the group's holder %q; leave it empty", name, cfg.Holder, g.cfg.Holder)
	}
	if cfg.Placer != nil && cfg.Placer != elector.Placer(g) {
		return nil, fmt.Errorf("placement: lease %q: Config.Placer is set to %T; leave it empty, the group places its leases", name, cfg.Placer)
	}
	if strings.HasPrefix(name, seatPrefix) {
		return nil, fmt.Errorf("placement: lease name %q starts with %q, which the groups' seats use; rename the lease", name, seatPrefix)
	}
	cfg.Holder, cfg.Placer = g.cfg.Holder, g
	e, err := elector.New(g.store, name, cfg)
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isLease[name] {
		return nil, fmt.Errorf("placement: lease %q is already in group %q; make one elector per lease", name, g.cfg.Name)
	}
	g.isLease[name] = true
	g.leases = append(g.leases, name)
	g.electors = append(g.electors, e)
	return e, nil
}

// Start joins the group: it reads the seats and leases once, takes the
// first free seat (or, if none is, keeps trying every RetryInterval while
// it counts itself a member), and starts the group's one goroutine. A store
// that fails is logged and read again at the next interval; Start returns
// an error only if ctx ends first, or if g was started or closed before.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	switch {
	case g.closed:
		g.mu.Unlock()
		return fmt.Errorf("placement: Start of group %q after Close", g.cfg.Name)
	case g.started:
		g.mu.Unlock()
		return fmt.Errorf("placement: group %q started twice", g.cfg.Name)
	}
	g.started = true
	g.mu.Unlock()
	if err := g.read(ctx); err != nil && ctx.Err() == nil {
		g.cfg.Logger.Warn("placement: read group", "group", g.cfg.Name, "err", err)
	}
	g.keepSeat(ctx)
	if err := ctx.Err(); err != nil {
		g.mu.Lock()
		seat := g.seat
		g.seat, g.started = nil, false
		g.mu.Unlock()
		g.leave(context.WithoutCancel(ctx), seat)
		return fmt.Errorf("placement: start group %q: %w", g.cfg.Name, err)
	}
	g.closeMu.Lock()
	g.mu.Lock()
	closed, seat := g.closed, g.seat
	if closed {
		g.seat = nil
	}
	g.mu.Unlock()
	if closed { // Close came while Start took its seat
		g.closeMu.Unlock()
		g.leave(context.WithoutCancel(ctx), seat)
		return fmt.Errorf("placement: Start of group %q after Close", g.cfg.Name)
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	g.cancel, g.done = cancel, done
	if n, ok := g.store.(elector.Notifier); ok {
		g.unwatch = n.Notify(g.changed)
	}
	g.closeMu.Unlock()
	go g.loop(loopCtx, done)
	return nil
}

// Close leaves the group: it stops the group's goroutine and waits for it,
// then frees this replica's seat. It is idempotent; after it, the group
// places nothing (Hold is 0, nothing yields but on Drain or Handoff).
func (g *Group) Close(ctx context.Context) error {
	g.closeMu.Lock()
	defer g.closeMu.Unlock()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	if g.unwatch != nil {
		g.unwatch()
		g.unwatch = nil
	}
	if g.cancel != nil {
		g.cancel()
		select {
		case <-g.done:
		case <-ctx.Done():
			return fmt.Errorf("placement: close group %q: %w", g.cfg.Name, ctx.Err())
		}
	}
	g.mu.Lock()
	seat := g.seat
	g.seat = nil
	g.mu.Unlock()
	return g.leave(ctx, seat)
}

// leave frees seat, if any, and logs it.
func (g *Group) leave(ctx context.Context, seat elector.Term) error {
	if seat == nil {
		return nil
	}
	err := seat.Resign(ctx)
	g.cfg.Logger.Info("placement: left group", "group", g.cfg.Name, "holder", g.cfg.Holder, "seat", seat.Lease().Name, "err", err)
	if err != nil {
		return fmt.Errorf("placement: leave group %q: %w", g.cfg.Name, err)
	}
	return nil
}

// loop is the group's goroutine: it reads the group every RetryInterval
// (jittered), keeps this replica's seat, and yields surplus terms.
func (g *Group) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(jitter(g.cfg.RetryInterval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-g.kick:
		}
		if err := g.read(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			g.cfg.Logger.Debug("placement: read group", "group", g.cfg.Name, "err", err)
		}
		g.keepSeat(ctx)
		g.balance()
		timer.Reset(jitter(g.cfg.RetryInterval))
	}
}

// read reads every seat and lease of the group, in one call if the store
// is an [elector.BulkReader], and records what it saw.
func (g *Group) read(ctx context.Context) error {
	g.mu.Lock()
	names := append(append(make([]string, 0, len(g.seats)+len(g.leases)), g.seats...), g.leases...)
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.TTL/2)
	defer cancel()
	var got []elector.Lease
	if br, ok := g.store.(elector.BulkReader); ok {
		var err error
		if got, err = br.GetMany(ctx, names); err != nil {
			return err
		}
		if len(got) != len(names) {
			return fmt.Errorf("GetMany returned %d leases for %d names", len(got), len(names))
		}
	} else {
		got = make([]elector.Lease, len(names))
		for i, name := range names {
			l, err := g.store.Get(ctx, name)
			switch {
			case errors.Is(err, elector.ErrNoLease):
				l = elector.Lease{Name: name}
			case err != nil:
				return err
			}
			got[i] = l
		}
	}
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, l := range got[:len(g.seats)] {
		g.sawSeatLocked(i, l, now)
	}
	for _, l := range got[len(g.seats):] {
		g.holders[l.Name] = l.Holder
		if _, ok := g.gave[l.Name]; ok && l.Holder != "" && l.Holder != g.cfg.Holder {
			delete(g.gave, l.Name)
			g.futile = 0
		}
	}
	return nil
}

// sawSeatLocked records that seat i was l at now. g.mu is held.
func (g *Group) sawSeatLocked(i int, l elector.Lease, now time.Time) {
	switch s := &g.seen[i]; {
	case l.Token == 0:
		*s = seen{}
	case l.Token != s.lease.Token || l.Version != s.lease.Version:
		*s = seen{lease: l, since: now}
	}
}

// changed records a seat's new state that the store pushed, so that a
// member that joins or leaves counts at once, not at the next read (a
// drained replica's leases then go to the members below the new target).
func (g *Group) changed(c elector.Change) {
	rest, ok := strings.CutPrefix(c.Name, g.seatPrefix)
	if !ok || !c.Known {
		return
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= len(g.seats) || g.seats[i] != c.Name {
		return
	}
	now := g.clock.Now()
	g.mu.Lock()
	g.sawSeatLocked(i, c.State, now)
	g.mu.Unlock()
}

// keepSeat drops this replica's seat if its term ended and, unless it is
// draining, tries once to take a free seat (or a dead one: its elector
// watches it over the tries and takes it over once it has seen it
// unchanged for a TTL).
func (g *Group) keepSeat(ctx context.Context) {
	g.mu.Lock()
	if g.seat != nil && isClosed(g.seat.Done()) {
		g.cfg.Logger.Info("placement: lost seat", "group", g.cfg.Name, "holder", g.cfg.Holder, "seat", g.seats[g.seatIdx], "err", g.seat.Err())
		g.seat = nil
	}
	if g.seat != nil || g.draining || g.closed {
		g.mu.Unlock()
		return
	}
	i := g.freeSeatLocked()
	if i < 0 {
		g.mu.Unlock()
		return
	}
	e := g.seatEl[i]
	if e == nil {
		var err error
		e, err = elector.New(g.store, g.seats[i], elector.Config{TTL: g.cfg.TTL, RetryInterval: g.cfg.RetryInterval, Holder: g.seatHolder})
		if err != nil { // New validated every part of the config
			g.mu.Unlock()
			g.cfg.Logger.Error("placement: seat elector", "group", g.cfg.Name, "err", err)
			return
		}
		g.seatEl[i] = e
	}
	g.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, g.cfg.RetryInterval/2)
	term, err := e.Campaign(cctx)
	cancel()
	if term == nil {
		if err != nil && cctx.Err() == nil {
			g.cfg.Logger.Debug("placement: take seat", "group", g.cfg.Name, "seat", g.seats[i], "err", err)
		}
		return
	}
	g.mu.Lock()
	if g.draining || g.seat != nil {
		g.mu.Unlock()
		_ = g.leave(ctx, term) // drained meanwhile
		return
	}
	g.seat, g.seatIdx = term, i
	g.seen[i] = seen{lease: term.Lease(), since: g.clock.Now()}
	g.mu.Unlock()
	g.cfg.Logger.Info("placement: joined group", "group", g.cfg.Name, "holder", g.cfg.Holder, "seat", g.seats[i])
}

// freeSeatLocked returns the first seat free as last read, or else the
// first whose holder looks dead, or -1. g.mu is held.
func (g *Group) freeSeatLocked() int {
	dead := -1
	for i, s := range g.seen {
		if s.lease.Token == 0 {
			return i
		}
		if dead < 0 && !g.liveLocked(s) {
			dead = i
		}
	}
	return dead
}

// liveLocked reports whether the member in a seat is live: its seat
// changed within the last TTL, or was first seen less than a TTL ago.
func (g *Group) liveLocked(s seen) bool {
	return s.lease.Token != 0 && g.clock.Now().Sub(s.since) < max(s.lease.TTL, g.cfg.TTL)
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
