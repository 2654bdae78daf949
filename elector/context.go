package elector

import "context"

type termKey struct{}

// ContextWithTerm returns a copy of ctx that carries t. The decorator package
// gives it to the jobs it starts.
func ContextWithTerm(ctx context.Context, t Term) context.Context {
	return context.WithValue(ctx, termKey{}, t)
}

// TermFromContext returns the term that ctx carries, if any.
func TermFromContext(ctx context.Context) (Term, bool) {
	t, ok := ctx.Value(termKey{}).(Term)
	return t, ok
}

// LeaseFromContext returns the lease of the term that ctx carries (see
// [Term.Lease]): its name, holder and token identify the term to a fenced
// write. ok is false if ctx carries no term.
func LeaseFromContext(ctx context.Context) (l Lease, ok bool) {
	t, ok := TermFromContext(ctx)
	if !ok {
		return Lease{}, false
	}
	return t.Lease(), true
}
