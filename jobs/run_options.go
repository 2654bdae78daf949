package jobs

import "context"

// RunOption configures [Run], and [Every] as well. Options are applied in
// order at construction.
type RunOption interface {
	EveryOption
	applyRun(*config)
}

// sharedOption is a RunOption made of the function that applies it.
type sharedOption func(*config)

func (o sharedOption) applyEvery(c *config) { o(c) }
func (o sharedOption) applyRun(c *config)   { o(c) }

// WithName names the job in its errors and logs, and in the decorated job's
// logs, errors and status. The default is
// "every <interval>" for [Every] and "run" for [Run]; an empty name keeps it.
func WithName(name string) RunOption {
	return sharedOption(func(c *config) {
		if name != "" {
			c.name = name
		}
	})
}

// WithErrorHandler sets the function that receives the errors of the job's
// function, and a *[decorator.PanicError] for a panic, but not an error that only says
// that Stop ended the function's context. It runs on the job's goroutine,
// with the job's run context, once the function has returned: for [Every],
// after each failed run, delaying the next; for [Run], when the function
// returns, and Stop then returns nil. A panic in h is logged with
// [log/slog.Default]. Without a handler, or with a nil h, [Every] logs each
// error with slog.Default at level Error, and [Run]'s Stop returns it.
func WithErrorHandler(h func(ctx context.Context, err error)) RunOption {
	return sharedOption(func(c *config) {
		if h != nil {
			c.onError = h
		}
	})
}
