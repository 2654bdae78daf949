package elector_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/leaderaware/leaderaware/elector"
)

// ctxTx is a transaction whose every step fails once its context ends, as a
// database/sql transaction does when the context it began with ends.
type ctxTx struct{ ctx context.Context }

func (tx ctxTx) Held(context.Context, elector.Lease) error { return tx.ctx.Err() }
func (tx ctxTx) Commit(context.Context) error              { return tx.ctx.Err() }
func (tx ctxTx) Rollback(context.Context) error            { return nil }

// TestFenceRefusesAsLostOnceTheTrustWindowCloses: a fenced write whose term
// loses its trust while fn runs (a frozen process, a slow fn) fails the
// Held check after fn with the context's error; Fence reports it as the
// refusal it is, matching ErrLeaseLost and ErrLeaseExpired, not as a bare
// context error.
func TestFenceRefusesAsLostOnceTheTrustWindowCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		term := campaign(t, newElector(t, &renewFails{Store: mem}, "a", fast))
		defer term.Abandon()
		err := elector.Fence(elector.ContextWithTerm(t.Context(), term),
			func(ctx context.Context, _ elector.Lease, _ time.Duration) (ctxTx, error) { return ctxTx{ctx}, nil },
			func(ctx context.Context, _ ctxTx) error {
				time.Sleep(fast.TTL) // past the trust window: its renewals fail
				return nil
			})
		assert.ErrorIs(t, err, elector.ErrLeaseLost)
		assert.ErrorIs(t, err, elector.ErrLeaseExpired)
	})
}

// renewFails is a Store whose renewals fail, so a term's trust runs out.
type renewFails struct{ elector.Store }

func (renewFails) Renew(context.Context, elector.Lease, time.Duration) (elector.Lease, error) {
	return elector.Lease{}, context.DeadlineExceeded
}
