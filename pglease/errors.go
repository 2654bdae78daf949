package pglease

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrSchemaTooNew is returned by [Open] and [New] when the lease table was
	// created or migrated by a newer pglease than this one. Nothing is
	// changed; upgrade this program.
	ErrSchemaTooNew = errors.New("pglease: lease table schema is newer than this pglease supports")
	// ErrClosed is returned by the operations of a [Store] after [Store.Close].
	ErrClosed = errors.New("pglease: store is closed")
)

// target describes the server and database of cfg for error messages: host,
// port, database and user, never the password.
func target(cfg *pgconn.Config) string {
	return fmt.Sprintf("host=%s port=%d database=%s user=%s", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// scrubbedError hides secrets in the text of the error it wraps. errors.Is
// and errors.As still see the wrapped error.
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

// withoutSecrets returns err with every occurrence of the secrets masked in
// its text. It returns err itself when no secret occurs in it.
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
// get behind a transaction pooler, which gives each transaction whichever
// server connection is free: the statement a connection prepared is
// missing there (invalid_sql_statement_name), or another client's of the
// same name is there already (duplicate_prepared_statement).
func isPoolerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "26000" || pgErr.Code == "42P05")
}

// poolerHint adds what to do to a transaction pooler's error (see
// isPoolerError) of a statement on the jobs' pool, which runs in the DSN's
// mode.
func poolerHint(err error) error {
	if isPoolerError(err) {
		return fmt.Errorf("%w (behind a transaction pooler such as PgBouncer? set default_query_exec_mode=cache_describe in the DSN)", err)
	}
	return err
}

var dsnPasswordRE = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// parseError reports a DSN that pgx could not parse. It does not wrap pgx's
// error: a *pgconn.ParseConfigError keeps the whole DSN, password included,
// in a public field. Its text is masked twice: by pgx, and here for every
// password this function can recognize.
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
