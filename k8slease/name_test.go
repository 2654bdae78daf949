package k8slease

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestObjectName: object names are kept, other lease names are encoded to
// valid object names that LeaseName reverses, names that would collide
// with an encoding are encoded too, and names too long to encode are
// refused with an error naming the limit.
func TestObjectName(t *testing.T) {
	for _, tt := range []struct{ name, obj string }{
		{"price-refresh", "price-refresh"},
		{"a.b-c", "a.b-c"},
		{"Price", ""},
		{"jobs/price refresh", ""},
		{"électeur", ""},
		{"b32.0123", ""}, // looks encoded: encoded again
		{"-x", ""},
		{strings.Repeat("a", 253), strings.Repeat("a", 253)},
		{strings.Repeat("A", maxEncodedName), ""},
	} {
		obj, err := ObjectName(tt.name)
		if err != nil {
			t.Errorf("ObjectName(%q): %v", tt.name, err)
			continue
		}
		if tt.obj != "" && obj != tt.obj {
			t.Errorf("ObjectName(%q) = %q, want %q", tt.name, obj, tt.obj)
		}
		if tt.obj == "" && !strings.HasPrefix(obj, encodedPrefix) {
			t.Errorf("ObjectName(%q) = %q, want it encoded", tt.name, obj)
		}
		if errs := validation.IsDNS1123Subdomain(obj); len(errs) > 0 {
			t.Errorf("ObjectName(%q) = %q, not an object name: %v", tt.name, obj, errs)
		}
		back, err := LeaseName(obj)
		if err != nil || back != tt.name {
			t.Errorf("LeaseName(%q) = %q, %v; want %q", obj, back, err, tt.name)
		}
	}
	for _, bad := range []string{"", strings.Repeat("A", maxEncodedName+1), "a\nb"} {
		if obj, err := ObjectName(bad); err == nil {
			t.Errorf("ObjectName(%.20q…) = %q, want an error", bad, obj)
		}
	}
	_, err := ObjectName(strings.Repeat("A", 200))
	if err == nil || !strings.Contains(err.Error(), "at most 155") || !strings.Contains(err.Error(), "lowercase") {
		t.Errorf("ObjectName of a long name: %v; want the limit and the fix", err)
	}
	if _, err := LeaseName("b32.!!"); err == nil {
		t.Error("LeaseName of a broken encoding: no error")
	}
}
