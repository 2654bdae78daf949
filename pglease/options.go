package pglease

import (
	"fmt"
	"log/slog"
	"strings"
)

// Defaults of the options.
const (
	// DefaultSchema is the schema of the lease table unless [WithSchema] says
	// otherwise.
	DefaultSchema = "public"
	// DefaultTable is the name of the lease table unless [WithTable] says
	// otherwise. The schema version record lives in DefaultTable + "_version".
	DefaultTable = "leaderaware_leases"
	// DefaultApplicationName is the application_name that [Open] gives its
	// connections unless the DSN or [WithApplicationName] sets one, so that
	// the store's backends are easy to find in pg_stat_activity.
	DefaultApplicationName = "leaderaware"
)

// maxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes.
const maxIdentLen = 63

// versionSuffix names the schema version table after the lease table.
const versionSuffix = "_version"

// An Option configures [Open] and [New]. Options are values: the same
// Option may be given to any number of stores.
type Option interface{ apply(*options) }

// options is what the Options set.
type options struct {
	schema  string
	table   string
	appName string // "" keeps the DSN's, or DefaultApplicationName
	listen  bool
	logger  *slog.Logger
}

func buildOptions(opts []Option) (options, error) {
	o := options{schema: DefaultSchema, table: DefaultTable, listen: true}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		opt.apply(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err := validIdent("schema", o.schema, maxIdentLen); err != nil {
		return o, err
	}
	if err := validIdent("table", o.table, maxIdentLen-len(versionSuffix)); err != nil {
		return o, err
	}
	return o, nil
}

func validIdent(what, name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("pglease: %s name is empty", what)
	case len(name) > maxLen:
		return fmt.Errorf("pglease: %s name %q is %d bytes; at most %d are allowed", what, name, len(name), maxLen)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("pglease: %s name %q contains a NUL byte", what, name)
	}
	return nil
}

type schemaOption string

func (o schemaOption) apply(opts *options) { opts.schema = string(o) }

// WithSchema puts the lease table in schema (default [DefaultSchema]). The
// store creates the schema if it does not exist. Stores that must not see
// each other's leases, such as tests sharing one database, use different
// schemas or tables.
func WithSchema(schema string) Option { return schemaOption(schema) }

type tableOption string

func (o tableOption) apply(opts *options) { opts.table = string(o) }

// WithTable names the lease table (default [DefaultTable]); its schema
// version record lives in the table name + "_version". The name is quoted,
// so it is used exactly as given; it may be at most 55 bytes.
func WithTable(table string) Option { return tableOption(table) }

type appNameOption string

func (o appNameOption) apply(opts *options) { opts.appName = string(o) }

// WithApplicationName sets the application_name of the connections that
// [Open] makes, overriding the DSN's (default: the DSN's, or
// [DefaultApplicationName]). With [New] it applies only to the connections
// the Store makes itself (for lease operations and the listener); the
// caller's pool keeps its settings.
func WithApplicationName(name string) Option { return appNameOption(name) }

type noListenerOption struct{}

func (noListenerOption) apply(opts *options) { opts.listen = false }

// WithoutListener turns off the LISTEN connection. [Store.WatchRelease] then
// reports only releases made through the same Store, and candidates in other
// processes notice a release at their next poll (elector Config.RetryInterval).
// Use it where LISTEN is unavailable, e.g. behind a transaction pooler,
// where the listener otherwise warns once that it hears nothing. Release
// still sends its NOTIFY.
func WithoutListener() Option { return noListenerOption{} }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(opts *options) { opts.logger = o.l }

// WithLogger sets where the store reports what it cannot return as an error:
// the listener losing its connection and reconnecting, or hearing no
// notifications at all (behind a transaction pooler). Default: nowhere.
// Messages never contain the connection password.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }
