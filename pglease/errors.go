package pglease

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrSchemaTooNew is returned by [Open] and [New] for a lease table of a
	// newer pglease; nothing is changed.
	ErrSchemaTooNew = errors.New("pglease: lease table schema is newer than this pglease supports")
	// ErrClosed is returned by a [Store]'s operations after [Store.Close].
	ErrClosed = errors.New("pglease: store is closed")
)

// target names the server and database of cfg, never the password.
func target(cfg *pgconn.Config) string {
	return fmt.Sprintf("host=%s port=%d database=%s user=%s", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// scrubbedError hides secrets in the text of the error it wraps.
type scrubbedError struct {
	err     error
	secrets []string
}

func (e *scrubbedError) Error() string { return scrub(e.err.Error(), e.secrets) }
func (e *scrubbedError) Unwrap() error { return e.err }

func scrub(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "xxxxx")
		}
	}
	return s
}

// withoutSecrets returns err with the secrets masked in its text.
func withoutSecrets(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, secret := range secrets {
		if secret != "" && strings.Contains(msg, secret) {
			return &scrubbedError{err: err, secrets: secrets}
		}
	}
	return err
}

// isPoolerError reports whether err is what pgx's named prepared statements
// get behind a transaction pooler, which lends each transaction any server
// connection: the statement is missing there (26000), or another client's
// of the same name is there already (42P05).
func isPoolerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "26000" || pgErr.Code == "42P05")
}

// poolerHint adds what to do to a transaction pooler's error.
func poolerHint(err error) error {
	if isPoolerError(err) {
		return fmt.Errorf("%w (behind a transaction pooler such as PgBouncer? set default_query_exec_mode=cache_describe in the DSN)", err)
	}
	return err
}

var dsnPasswordRE = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// parseError reports a DSN that pgx could not parse, without wrapping pgx's
// error (it keeps the whole DSN, password included, in a public field), its
// text masked by pgx and again here.
func parseError(dsn string, err error) error {
	var secrets []string
	if u, uerr := url.Parse(dsn); uerr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	for _, m := range dsnPasswordRE.FindAllStringSubmatch(dsn, -1) {
		pw := m[1]
		secrets = append(secrets, pw, strings.Trim(pw, "'"))
	}
	msg := dsnPasswordRE.ReplaceAllString(scrub(err.Error(), secrets), "password=xxxxx")
	return fmt.Errorf("pglease: parse DSN: %s", msg)
}
