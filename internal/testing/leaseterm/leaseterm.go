// Package leaseterm gives tests and harnesses a fenced write's context for a
// bare lease, as a holder without an elector (or a zombie that kept an old
// lease) would make: only the store's own checks can refuse its writes.
package leaseterm

import (
	"context"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Context returns ctx carrying a term of l that never ends and is trusted
// for another hour whenever asked.
func Context(ctx context.Context, l elector.Lease) context.Context {
	return elector.ContextWithTerm(ctx, term{l})
}

type term struct{ l elector.Lease }

func (t term) Lease() elector.Lease          { return t.l }
func (t term) Token() uint64                 { return t.l.Token }
func (t term) Done() <-chan struct{}         { return nil }
func (t term) TrustRemaining() time.Duration { return time.Hour }
func (t term) Err() error                    { return nil }
func (t term) Resign(context.Context) error  { return nil }
func (t term) Abandon()                      {}
