package pglease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// FencedLease is [Store.Fenced] for the term l rather than the one ctx
// carries, trusted for a whole window of l's TTL from now: only the lease
// row decides. For the tests of the database's fence, such as a stale
// leader that writes after its term ended.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := elector.ValidateTTL(l.TTL); err != nil {
		return fmt.Errorf("pglease: fenced write for lease %q: pass the lease the store returned: %w", l.Name, err)
	}
	t := fixedTerm{l: l, until: clock.Now().Add(l.TTL - elector.SafetyMargin(l.TTL))}
	return s.Fenced(elector.ContextWithTerm(ctx, t), fn)
}

// fixedTerm is FencedLease's term: it never ends and is trusted until until.
type fixedTerm struct {
	l     elector.Lease
	until time.Time
}

func (t fixedTerm) Lease() elector.Lease             { return t.l }
func (t fixedTerm) Token() uint64                    { return t.l.Token }
func (t fixedTerm) Done() <-chan struct{}            { return nil }
func (t fixedTerm) TrustRemaining() time.Duration    { return max(0, t.until.Sub(clock.Now())) }
func (t fixedTerm) Err() error                       { return nil }
func (t fixedTerm) Resign(ctx context.Context) error { return nil }
func (t fixedTerm) Abandon()                         {}
