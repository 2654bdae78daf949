package jobs

import (
	"errors"
	"fmt"
)

// ErrAlreadyStarted is returned by the Start of an [EveryJob] or a [Run] job
// that was started and not stopped since: Start never launches a second
// goroutine. Call Stop first.
var ErrAlreadyStarted = errors.New("job already started")

// PanicError is the error that a panic in the function of an [EveryJob] or a
// [Run] job becomes: the panic is recovered, and the PanicError is handled
// like an error the function returned (see [WithErrorHandler]). An EveryJob
// keeps its schedule.
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
