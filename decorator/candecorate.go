package decorator

import (
	"fmt"
	"reflect"
)

var decoratedType = reflect.TypeFor[*decorated]()

// CanDecorate returns nil if [Decorate] can return a decorated job as J, and
// otherwise the error whose text Decorate panics with. J must be an
// interface type, every method of which a decorated job has: Start, Stop,
// Unwrap() Job and String() string. fxmodule calls it to refuse a J before
// it builds anything.
func CanDecorate[J Job]() error {
	t := reflect.TypeFor[J]()
	why := whyNot(t)
	if why == "" {
		return nil
	}
	return fmt.Errorf("decorator.Decorate: cannot return the decorated job as %v: J must be an interface type with only Start and Stop (%s)", t, why)
}

// whyNot returns why a *decorated cannot be returned as t, or "".
func whyNot(t reflect.Type) string {
	if t.Kind() != reflect.Interface {
		return "it is a " + kindName(t.Kind())
	}
	for i := range t.NumMethod() {
		m := t.Method(i)
		dm, ok := decoratedType.MethodByName(m.Name)
		if !ok || m.PkgPath != "" {
			return fmt.Sprintf("it has method %s that a decorated job does not", m.Name)
		}
		if sig := withoutReceiver(dm.Type); sig != m.Type {
			return fmt.Sprintf("its method %s is %v; a decorated job's is %v", m.Name, m.Type, sig)
		}
	}
	if !decoratedType.Implements(t) {
		return "a decorated job does not implement it"
	}
	return ""
}

// withoutReceiver returns the type of method type f without its receiver.
func withoutReceiver(f reflect.Type) reflect.Type {
	in := make([]reflect.Type, 0, f.NumIn()-1)
	for i := 1; i < f.NumIn(); i++ {
		in = append(in, f.In(i))
	}
	out := make([]reflect.Type, 0, f.NumOut())
	for i := range f.NumOut() {
		out = append(out, f.Out(i))
	}
	return reflect.FuncOf(in, out, f.IsVariadic())
}

func kindName(k reflect.Kind) string {
	if k == reflect.Pointer {
		return "pointer"
	}
	return k.String()
}
