package mysqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrClosed is returned by the operations of a [Store] after [Store.Close].
	ErrClosed = errors.New("mysqllease: store is closed")
	// ErrSchemaTooNew is returned by [Open] and [New] when a newer mysqllease
	// made the lease table. Nothing is changed; upgrade this program.
	ErrSchemaTooNew = errors.New("mysqllease: lease table schema is newer than this mysqllease supports")
	// ErrTableMissing is returned by [Open] and [New] when the schema version
	// table records a lease table that someone dropped: none is made anew.
	ErrTableMissing = errors.New("mysqllease: lease table is missing")
)

// MySQL and MariaDB error numbers the store acts on.
const (
	errDupEntry         = 1062 // ER_DUP_ENTRY
	errDeadlock         = 1213 // ER_LOCK_DEADLOCK
	errStatementTimeout = 1969 // ER_STATEMENT_TIMEOUT (MariaDB's max_statement_time)
	errNoSuchTable      = 1146 // ER_NO_SUCH_TABLE
	errUnknownColumn    = 1054 // ER_BAD_FIELD_ERROR
	errUnknownDB        = 1049 // ER_BAD_DB_ERROR
	errAccessDenied     = 1045 // ER_ACCESS_DENIED_ERROR
	errAccessDeniedDB   = 1044 // ER_DBACCESS_DENIED_ERROR
)

// isMySQLError reports whether err is the server's error number n.
func isMySQLError(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}

// isConnError reports whether err means the connection, not the statement,
// failed, so that the connection must not carry another statement.
func isConnError(err error) bool {
	var netErr net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr)
}

// target describes the server and database of cfg for error messages:
// user, network address and database, never the password.
func target(cfg *mysql.Config) string {
	return fmt.Sprintf("%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// scrubbedError hides a password in the text of the error it wraps.
// errors.Is and errors.As still see the wrapped error.
type scrubbedError struct {
	err    error
	secret string
}

func (e *scrubbedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.secret, "xxxxx") }
func (e *scrubbedError) Unwrap() error { return e.err }

// withoutSecret returns err with every occurrence of secret masked in its
// text, or err itself when secret does not occur in it.
func withoutSecret(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbedError{err: err, secret: secret}
}
