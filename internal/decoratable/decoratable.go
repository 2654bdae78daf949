// Package decoratable tells whether decorator.Decorate can return its job as
// a type J. It is shared by the decorator, which panics with the reason, and
// fxmodule, which returns it as an error before it builds anything.
package decoratable

import (
	"context"
	"fmt"
	"reflect"
)

// jobPkg and jobName identify decorator.Job, the result of a decorated job's
// Unwrap: a named type is identified by its package path and name.
const jobPkg, jobName = "github.com/leaderaware/leaderaware/decorator", "Job"

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
	strType = reflect.TypeFor[string]()

	// methods are the methods of a decorated job other than Unwrap (the
	// decorator package asserts that its job has them all).
	methods = map[string]reflect.Type{
		"Start":  reflect.FuncOf([]reflect.Type{ctxType}, []reflect.Type{errType}, false),
		"Stop":   reflect.FuncOf([]reflect.Type{ctxType}, []reflect.Type{errType}, false),
		"String": reflect.FuncOf(nil, []reflect.Type{strType}, false),
	}
)

// Check returns nil if decorator.Decorate can return its job as J, and
// otherwise the error Decorate panics with. J must be an interface type,
// every method of which a decorated job has: Start, Stop, Unwrap() Job and
// String() string.
func Check[J any]() error {
	t := reflect.TypeFor[J]()
	why := whyNot(t)
	if why == "" {
		return nil
	}
	return fmt.Errorf("decorator.Decorate: cannot return the decorated job as %v: J must be an interface type with only Start and Stop (%s)", t, why)
}

// whyNot returns why a decorated job cannot be returned as t, or "".
func whyNot(t reflect.Type) string {
	if t.Kind() != reflect.Interface {
		if t.Kind() == reflect.Pointer {
			return "it is a pointer"
		}
		return "it is a " + t.Kind().String()
	}
	for i := range t.NumMethod() {
		m := t.Method(i)
		if m.PkgPath != "" {
			return fmt.Sprintf("it has method %s that a decorated job does not", m.Name)
		}
		if m.Name == "Unwrap" {
			if !isUnwrap(m.Type) {
				return fmt.Sprintf("its method Unwrap is %v; a decorated job's is func() decorator.Job", m.Type)
			}
			continue
		}
		want, ok := methods[m.Name]
		if !ok {
			return fmt.Sprintf("it has method %s that a decorated job does not", m.Name)
		}
		if m.Type != want {
			return fmt.Sprintf("its method %s is %v; a decorated job's is %v", m.Name, m.Type, want)
		}
	}
	return ""
}

// isUnwrap reports whether f is func() decorator.Job.
func isUnwrap(f reflect.Type) bool {
	if f.NumIn() != 0 || f.NumOut() != 1 || f.IsVariadic() {
		return false
	}
	out := f.Out(0)
	return out.PkgPath() == jobPkg && out.Name() == jobName
}
