package fanout

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/elector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source is a wake-up source that sends what the test gives it.
type source struct {
	started chan struct{}
	changes chan elector.Change
	sent    chan struct{}
}

func newSource() *source {
	return &source{started: make(chan struct{}, 10), changes: make(chan elector.Change), sent: make(chan struct{})}
}

func (f *source) run(ctx context.Context, send func(elector.Change)) {
	f.started <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-f.changes:
			send(c)
			f.sent <- struct{}{}
		}
	}
}

func (f *source) send(c elector.Change) {
	f.changes <- c
	<-f.sent
}

type calls []elector.Change

func (c *calls) changed(ch elector.Change) { *c = append(*c, ch) }

// TestSource proves that the first Notify starts the source and the last
// stop stops it and waits for it, that every subscriber gets each change
// until its stop, that stop is idempotent, and that after Close nothing
// starts.
func TestSource(t *testing.T) {
	f := newSource()
	s := New(f.run)
	if s.Running() {
		t.Fatal("running before any Notify")
	}
	var a, b calls
	stopA := s.Notify(a.changed)
	stopB := s.Notify(b.changed)
	<-f.started
	f.send(elector.Change{Name: "x"})
	stopA()
	stopA()
	f.send(elector.Change{Name: "y"})
	if len(a) != 1 || len(b) != 2 || b[1].Name != "y" {
		t.Fatalf("a got %v, b got %v; want [x] and [x y]", a, b)
	}
	if !s.Running() {
		t.Fatal("stopped while b listens")
	}
	stopB()
	if s.Running() {
		t.Fatal("running after the last stop")
	}
	select {
	case <-f.started:
		t.Fatal("started twice")
	default:
	}

	var c calls
	stopC := s.Notify(c.changed)
	<-f.started
	f.send(elector.Change{Name: "z"})
	s.Close()
	if s.Running() || len(c) != 1 {
		t.Fatalf("after Close: running %v, c got %v", s.Running(), c)
	}
	stopC()
	s.Notify(c.changed)()
	if s.Running() {
		t.Fatal("Notify after Close started the source")
	}
	s.Close()
}

// TestSendAndPrepared proves that Send reaches every callback not stopped
// (and none after Close), that a Source without a wake-up source starts
// nothing, and that Prepared prepares each start before Notify returns.
func TestSendAndPrepared(t *testing.T) {
	s := New(nil)
	var a, b calls
	stopA := s.Notify(a.changed)
	s.Notify(b.changed)
	if s.Running() {
		t.Fatal("a Source without a wake-up source runs one")
	}
	s.Send(elector.Change{Name: "x"})
	stopA()
	s.Send(elector.Change{Name: "y"})
	s.Close()
	s.Send(elector.Change{Name: "z"})
	if len(a) != 1 || len(b) != 2 || b[1].Name != "y" {
		t.Fatalf("a got %v, b got %v; want [x] and [x y]", a, b)
	}

	f := newSource()
	prepared := 0
	p := Prepared(func() Run { prepared++; return f.run })
	for want := 1; want <= 2; want++ {
		stop := p.Notify(a.changed)
		if prepared != want {
			t.Fatalf("after Notify %d: prepared %d times", want, prepared)
		}
		<-f.started
		stop()
	}
	p.Close()
}
