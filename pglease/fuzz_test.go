package pglease

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseDSN checks that any DSN either parses or gives a pglease error
// that hides the password, and never panics. It never connects.
func FuzzParseDSN(f *testing.F) {
	for _, seed := range []string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"postgres://u:s3cr3t-pw@db.example:5433/app?sslmode=require&application_name=x",
		"host=localhost port=5432 dbname=test user=postgres password='s3cr3t pw'",
		"postgres://u:s3cr3t-pw@[::1:5432/db",
		"host=a port=notaport password=s3cr3t-pw",
		"postgresql:///db?host=/var/run/postgresql",
		"",
		"%%%",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		cfg, err := parseDSN(dsn, options{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pglease: parse DSN: ") {
				t.Fatalf("parseDSN(%q): error %q does not say where it comes from", dsn, err)
			}
			if u, uerr := url.Parse(dsn); uerr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 6 && strings.Contains(err.Error(), pw) {
					t.Fatalf("parseDSN(%q): error %q shows the password %q", dsn, err, pw)
				}
			}
			return
		}
		if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
			t.Fatalf("parseDSN(%q): no application_name", dsn)
		}
	})
}
