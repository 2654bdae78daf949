package decorator

import "context"

// Job is a background job with the lifecycle fx runs: Start launches the
// work and returns, Stop ends it and returns when it has ended (or ctx ends).
type Job interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Middleware wraps a Job in another Job. The jobs of the stock middleware,
// like a decorated job, have an Unwrap() Job method that returns the job
// they wrap.
type Middleware func(next Job) Job
