package pglease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestServerClockStepMakesNoSecondLeader moves every timestamp of the live
// lease back by a minute, again and again, which is what a forward step of
// the server's clock looks like to anything that compares them (the old
// store took the lease over at once). Candidates compare no timestamps: a
// watching candidate never takes over a lease its holder keeps renewing.
func TestServerClockStepMakesNoSecondLeader(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	cfg := elector.Config{TTL: time.Second, RenewInterval: 300 * time.Millisecond, RetryInterval: 100 * time.Millisecond}
	cfg.Holder = "holder"
	holder, err := elector.New(s, "stepped", cfg)
	require.NoError(t, err)
	term, err := holder.Campaign(testCtx(t))
	require.NoError(t, err)
	defer func() { _ = term.Resign(context.Background()) }()

	cfg.Holder = "candidate"
	candidate, err := elector.New(s, "stepped", cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(testCtx(t), 4*time.Second)
	defer cancel()
	won := make(chan error, 1)
	go func() {
		other, err := candidate.Campaign(ctx)
		if err == nil {
			_ = other.Resign(context.Background())
		}
		won <- err
	}()
	conn := rawConn(t)
	for ctx.Err() == nil {
		_, err := conn.Exec(testCtx(t), `UPDATE `+s.Table()+` SET written_at = written_at - interval '60 seconds' WHERE name = 'stepped'`)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
	}
	require.ErrorIs(t, <-won, context.DeadlineExceeded, "the candidate took over a lease whose holder kept renewing")
	select {
	case <-term.Done():
		t.Fatalf("the holder lost its term: %v", term.Err())
	default:
	}
}
