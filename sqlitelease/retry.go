package sqlitelease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Backoff between attempts of an operation that found the database busy.
const (
	minBusyBackoff = time.Millisecond
	maxBusyBackoff = 50 * time.Millisecond
)

// sqliteCode returns the primary SQLite result code of err, or 0 if err is
// not an SQLite error.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// isBusy reports whether err says another connection holds a lock that the
// operation needed (SQLITE_BUSY or SQLITE_LOCKED, any extended code).
func isBusy(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// retryBusy runs op until it returns something other than a busy error,
// sleeping a short, growing, jittered backoff in between. It gives up when
// ctx ends, returning an error that matches ctx's error and says that the
// database was busy. op must be safe to repeat after a busy error, which
// every single SQLite statement is: a busy statement changed nothing.
func retryBusy(ctx context.Context, op func() error) error {
	err := op()
	if err == nil || !isBusy(err) {
		return err
	}
	backoff := minBusyBackoff
	timer := time.NewTimer(jitter(backoff))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (the database stayed busy: %w)", ctx.Err(), err)
		case <-timer.C:
		}
		busy := err
		if err = op(); err == nil || !isBusy(err) {
			if err != nil && ctx.Err() != nil {
				// ctx ended during this attempt, which the driver
				// interrupted: the database was still busy.
				return fmt.Errorf("%w (the database stayed busy: %w)", ctx.Err(), busy)
			}
			return err
		}
		backoff = min(2*backoff, maxBusyBackoff)
		timer.Reset(jitter(backoff))
	}
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}
