package pglease

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/leaderaware/leaderaware/internal/pgsql"
)

// Defaults of the options.
const (
	DefaultSchema          = "public"             // of the lease table ([WithSchema])
	DefaultTable           = "leaderaware_leases" // the lease table ([WithTable])
	DefaultApplicationName = "leaderaware"        // of the connections ([WithApplicationName])
)

const (
	maxIdentLen   = 63         // PostgreSQL's identifier limit, in bytes
	versionSuffix = "_version" // names the schema version table after the lease table
)

// An Option configures [Open] and [New]. The same Option may be given to
// any number of stores.
type Option interface{ apply(*options) }

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
	if err := validIdent("table", o.table, maxIdentLen-max(len(versionSuffix), len(pgsql.TokenSuffix))); err != nil {
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

// WithSchema puts the lease table in schema, which the store creates if
// missing.
func WithSchema(schema string) Option { return schemaOption(schema) }

type tableOption string

func (o tableOption) apply(opts *options) { opts.table = string(o) }

// WithTable names the lease table, exactly as given (at most 55 bytes);
// its schema version record lives in table + "_version".
func WithTable(table string) Option { return tableOption(table) }

type appNameOption string

func (o appNameOption) apply(opts *options) { opts.appName = string(o) }

// WithApplicationName sets the application_name of the connections the
// Store makes, overriding the DSN's ([New]'s pool keeps its own).
func WithApplicationName(name string) Option { return appNameOption(name) }

type noListenerOption struct{}

func (noListenerOption) apply(opts *options) { opts.listen = false }

// WithoutListener turns off the LISTEN connection, e.g. behind a
// transaction pooler: [Store.Notify] then reports only the releases made
// through the same Store, and the core notices the others at its next poll.
func WithoutListener() Option { return noListenerOption{} }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(opts *options) { opts.logger = o.l }

// WithLogger sets where the store reports what it cannot return as an
// error (the listener's reconnects, a pooler detected). Default: nowhere.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }
