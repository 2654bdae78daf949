package etcdlease

import (
	"strings"
	"testing"
	"time"
)

// FuzzValuePrefix checks that the prefixes the compare-and-sets match are
// the leading bytes of the values the store writes, and of no value of
// another term, released flag or holder: what every compare relies on.
func FuzzValuePrefix(f *testing.F) {
	for _, h := range []string{"a", "web-1 <\"x\">", "a,b", `back\slash`, "ünïcode\u2028", "a\"", "ab"} {
		f.Add(h, uint64(7), false)
	}
	f.Fuzz(func(t *testing.T, holder string, token uint64, released bool) {
		v := record{Released: released, Token: token, Holder: holder, TTL: "15s", Written: time.Now().UTC()}.encode()
		p := valuePrefix(released, token, &holder)
		if !strings.HasPrefix(v, p) {
			t.Fatalf("value %s does not start with its prefix %s", v, p)
		}
		if !(v > p && v < p[:len(p)-1]+"-") {
			t.Fatalf("value %s is not strictly between the bounds of %s", v, p)
		}
		for _, other := range []string{
			valuePrefix(!released, token, &holder),
			valuePrefix(released, token+1, &holder),
			valuePrefix(released, token*10, &holder),
			valuePrefix(released, token, new(holder+"x")),
			valuePrefix(released, token, new(holder+`"`)),
		} {
			if other != p && v > other && v < other[:len(other)-1]+"-" {
				t.Fatalf("value %s matches the prefix %s of another state", v, other)
			}
		}
	})
}
