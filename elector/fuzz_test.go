package elector_test

import (
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leaderaware/leaderaware/elector"
)

// FuzzValidateName checks that ValidateName accepts exactly the names of
// 1–255 bytes of printable UTF-8, and never panics.
func FuzzValidateName(f *testing.F) {
	for _, seed := range []string{"job", "price refresh", "日本語", "", "a\x00b", "\xff", "tab\t", string(make([]byte, 256))} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := elector.ValidateName(name)
		want := len(name) >= 1 && len(name) <= elector.MaxNameLen && utf8.ValidString(name)
		for _, r := range name {
			want = want && unicode.IsPrint(r)
		}
		if (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v; want valid=%v", name, err, want)
		}
	})
}

// FuzzConfig checks that New either refuses a configuration with an error or
// returns an elector whose timings leave room for two renewals inside the
// trust window, and never panics.
func FuzzConfig(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), "")
	f.Add(int64(15*time.Second), int64(5*time.Second), int64(2*time.Second), "host-1")
	f.Add(int64(time.Second), int64(time.Second), int64(time.Second), "x")
	f.Add(int64(-1), int64(3), int64(-5), "bad\nholder")
	f.Add(int64(1<<62), int64(1<<61), int64(1), "big")
	f.Add(int64(1<<63-1), int64(1<<62), int64(1), "overflow")
	f.Fuzz(func(t *testing.T, ttl, renew, retry int64, holder string) {
		cfg := elector.Config{TTL: time.Duration(ttl), RenewInterval: time.Duration(renew), RetryInterval: time.Duration(retry), Holder: holder}
		e, err := elector.New(elector.NewMemoryStore(), "job", cfg)
		if (err == nil) != (cfg.Validate() == nil) {
			t.Fatalf("New and Config.Validate disagree on %+v: %v", cfg, err)
		}
		if err != nil {
			return
		}
		got := e.Config()
		if got.TTL <= 0 || got.RenewInterval <= 0 || got.RetryInterval <= 0 {
			t.Fatalf("New(%+v) accepted non-positive timings %+v", cfg, got)
		}
		if got.RenewInterval > (got.TTL-elector.SafetyMargin(got.TTL))/2 {
			t.Fatalf("New(%+v) accepted %+v: fewer than two renewals in the trust window", cfg, got)
		}
		if elector.ValidateHolder(got.Holder) != nil {
			t.Fatalf("New(%+v) accepted holder %q", cfg, got.Holder)
		}
	})
}
