package decorator

// Chain is an immutable, ordered list of [Middleware]. The zero value is an
// empty chain. Chains may be copied and shared freely: no method changes the
// chain it is called on.
type Chain struct {
	mws []Middleware // never aliased by another Chain's appends; no nils
}

// NewChain returns a chain of mws in order. It copies mws, so later changes
// to the caller's slice do not affect the chain. Nil middleware are skipped.
func NewChain(mws ...Middleware) Chain {
	return Chain{mws: appendNonNil(nil, mws)}
}

// Append returns a new chain of c's middleware followed by mws. c is
// unchanged, and the new chain shares no backing array with c, so appending
// to one chain twice yields two independent chains. Nil middleware are
// skipped.
func (c Chain) Append(mws ...Middleware) Chain {
	out := make([]Middleware, 0, len(c.mws)+len(mws))
	out = append(out, c.mws...)
	return Chain{mws: appendNonNil(out, mws)}
}

// Then returns j wrapped in c's middleware. The first middleware is the
// outermost: for NewChain(a, b).Then(j), a call goes a → b → j. An empty
// chain returns j itself. Then builds the wrappers once; calls through the
// result cost only the wrappers' own work.
func (c Chain) Then(j Job) Job {
	for i := len(c.mws) - 1; i >= 0; i-- {
		j = c.mws[i](j)
	}
	return j
}

// appendNonNil appends the non-nil entries of mws to dst, returning a slice
// with no spare capacity when dst was nil.
func appendNonNil(dst, mws []Middleware) []Middleware {
	for _, m := range mws {
		if m != nil {
			dst = append(dst, m)
		}
	}
	if len(dst) == 0 {
		return nil
	}
	return dst[:len(dst):len(dst)]
}
