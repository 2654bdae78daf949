package elector_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// recorder is an Observer that keeps a line per event.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Observe(e elector.Event) {
	line := fmt.Sprintf("%s %s %s token=%d", e.Kind, e.Lease, e.Holder, e.Token)
	switch e.Kind {
	case elector.EventStoreOp:
		line += fmt.Sprintf(" %s %s in %v", e.Op, e.Result, e.Duration)
	case elector.EventCampaign, elector.EventFenced:
		line += " " + e.Result.String()
	}
	if e.Trust > 0 {
		line += fmt.Sprintf(" trust %v", e.Trust)
	}
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func TestObserverSeesStoreCallsAndCampaigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		rec := &recorder{}
		cfg := fast
		cfg.Observer = rec
		a := newElector(t, s, "a", cfg)
		ta := campaign(t, a)
		tok := ta.Token()
		assert.Equal(t, []string{
			fmt.Sprintf("store_operation job a token=%d acquire ok in 0s", tok),
			fmt.Sprintf("campaign job a token=%d ok trust 2.7s", tok),
		}, rec.take())

		time.Sleep(fast.RenewInterval)
		synctest.Wait()
		assert.Equal(t, []string{fmt.Sprintf("store_operation job a token=%d renew ok in 0s trust 2.7s", tok)}, rec.take())

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := newElector(t, s, "b", cfg).Campaign(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []string{
			"store_operation job b token=0 acquire held in 0s",
			"campaign job b token=0 held",
		}, rec.take())

		require.NoError(t, ta.Resign(t.Context()))
		assert.Equal(t, []string{fmt.Sprintf("store_operation job a token=%d release ok in 0s", tok)}, rec.take())
	})
}

func TestObserveFencedNeedsObserverAndTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		term := campaign(t, newElector(t, elector.NewMemoryStore(), "a", fast))
		defer term.Resign(context.Background())
		ctx := elector.ContextWithObserver(elector.ContextWithTerm(t.Context(), term), rec)
		elector.ObserveFenced(ctx, nil)
		elector.ObserveFenced(ctx, fmt.Errorf("fenced: %w", elector.ErrLeaseLost))
		elector.ObserveFenced(ctx, errors.New("disk full")) // not a fencing outcome
		elector.ObserveFenced(elector.ContextWithTerm(t.Context(), term), nil)
		assert.Equal(t, []string{
			fmt.Sprintf("fenced_write job a token=%d ok", term.Token()),
			fmt.Sprintf("fenced_write job a token=%d lost", term.Token()),
		}, rec.take())
	})
}

func TestEventNames(t *testing.T) {
	assert.Equal(t, "demoted", elector.EventDemoted.String())
	assert.Equal(t, "start_failed", elector.CauseStartFailed.String())
	assert.Equal(t, "unknown", elector.Cause(0).String())
	assert.Equal(t, "unknown", elector.Op(200).String())
	assert.Equal(t, elector.CauseExpired, elector.CauseOf(fmt.Errorf("x: %w", elector.ErrLeaseExpired)))
	assert.Equal(t, elector.CauseAbandoned, elector.CauseOf(elector.ErrAbandoned))
	assert.Equal(t, elector.ResultHeld, elector.ResultOf(&elector.HeldError{}))
}
