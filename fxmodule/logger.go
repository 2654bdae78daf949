package fxmodule

import (
	"log/slog"

	"go.uber.org/fx"
)

// moduleLogger is the logger of every line that Module, its store and the
// LeaderJobs of the app write.
type moduleLogger struct{ l *slog.Logger }

// loggerParams asks for the app's logger, if the graph has one.
type loggerParams struct {
	fx.In
	Logger *slog.Logger `optional:"true"`
}

// provideLogger provides the moduleLogger: configured if not nil, else the
// graph's *slog.Logger, else slog.Default as it is when the app is built.
func provideLogger(configured *slog.Logger) fx.Option {
	return fx.Provide(func(p loggerParams) *moduleLogger {
		switch {
		case configured != nil:
			return &moduleLogger{configured}
		case p.Logger != nil:
			return &moduleLogger{p.Logger}
		}
		return &moduleLogger{slog.Default()}
	})
}

// opened logs the store that Module opened.
func (m *moduleLogger) opened(attrs ...any) { m.l.Info("fxmodule: opened the lease store", attrs...) }
