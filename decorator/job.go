package decorator

import "context"

// Job is a background job with the lifecycle fx runs: Start launches the
// work and returns, Stop ends it and returns when it has ended (or ctx ends).
type Job interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Middleware wraps a Job in another Job. A middleware's job should have an
// Unwrap() Job method returning next, so that [Depth] can count it.
type Middleware func(next Job) Job
