package jobs

import (
	"errors"
	"fmt"
)

// ErrAlreadyStarted is returned by [EveryJob.Start] when the job runs
// already: Start never launches a second goroutine. Call Stop first.
var ErrAlreadyStarted = errors.New("job already started")

// PanicError is what the error handler of an [EveryJob] receives when the
// function panics. The panic is recovered; the job keeps its schedule.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the stack of the panicking goroutine, from runtime/debug.Stack
}

// Error names the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("jobs: panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error, so [errors.Is] and
// [errors.As] see through the panic.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
