package jobs

import "errors"

// ErrAlreadyStarted is returned by the Start of an [EveryJob] or a [Run] job
// that was started and not stopped since: Start never launches a second
// goroutine. Call Stop first.
var ErrAlreadyStarted = errors.New("job already started")
