package decorator

import (
	"context"
	"fmt"
	"runtime/debug"
)

// PanicError is the error a panic in a job's Start or Stop becomes, both in
// the [Recover] middleware and in the decorated job itself (which also
// recovers panics of its elector's Campaign and of Term.Resign and
// Term.Abandon).
type PanicError struct {
	Method string // the method that panicked: "Start", "Stop", "Campaign", "Resign" or "Abandon"
	Value  any    // the value passed to panic
	Stack  []byte // the panicking goroutine's stack, from runtime/debug.Stack
}

// Error names the method and the panic value.
func (e *PanicError) Error() string {
	return fmt.Sprintf("decorator: panic in %s: %v", e.Method, e.Value)
}

// Unwrap returns the panic value if it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Recover returns a middleware that turns a panic in the next job's Start
// or Stop into a returned *[PanicError] carrying the value and the stack.
func Recover() Middleware {
	return func(next Job) Job { return &recoverJob{next: next} }
}

type recoverJob struct{ next Job }

func (r *recoverJob) Start(ctx context.Context) error {
	return protect("Start", func() error { return r.next.Start(ctx) })
}

func (r *recoverJob) Stop(ctx context.Context) error {
	return protect("Stop", func() error { return r.next.Stop(ctx) })
}

// Unwrap returns the job that r wraps.
func (r *recoverJob) Unwrap() Job { return r.next }

// protect calls f, turning a panic into a *PanicError of method.
func protect(method string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Method: method, Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}
