package decorator_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

func TestRecover(t *testing.T) {
	errBoom := errors.New("boom")
	inner := &fakeJob{
		startFn: func(context.Context) error { panic("start boom") },
		stopFn:  func(context.Context) error { panic(errBoom) },
	}
	j := decorator.Recover()(inner)
	require.Equal(t, 1, decorator.Depth(j))

	var pe *decorator.PanicError
	err := j.Start(context.Background())
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "Start", pe.Method)
	require.Equal(t, "start boom", pe.Value)
	require.Contains(t, string(pe.Stack), "decorator_test.TestRecover")
	require.EqualError(t, err, "decorator: panic in Start: start boom")

	err = j.Stop(context.Background())
	require.ErrorIs(t, err, errBoom, "a panic(err) unwraps to err")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "Stop", pe.Method)

	ok := decorator.Recover()(&fakeJob{})
	require.NoError(t, ok.Start(context.Background()))
	require.NoError(t, ok.Stop(context.Background()))
}

func TestLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newElector(t, elector.NewMemoryStore(), "host-1")
		term, err := e.Campaign(ctx)
		require.NoError(t, err)
		defer term.Resign(ctx)

		var buf bytes.Buffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		inner := &fakeJob{
			startFn: func(context.Context) error { time.Sleep(2 * time.Second); return nil },
			stopFn:  func(context.Context) error { return errors.New("still busy") },
		}
		j := decorator.Log(l)(inner)
		require.Equal(t, 1, decorator.Depth(j))
		tctx := elector.ContextWithTerm(ctx, term)
		require.NoError(t, j.Start(tctx))
		require.Error(t, j.Stop(tctx))
		require.NoError(t, j.Start(ctx)) // no term
		require.Equal(t,
			`level=INFO msg="job Start" job=*decorator_test.fakeJob lease=job holder=host-1 token=1 duration=2s`+"\n"+
				`level=INFO msg="job Stop" job=*decorator_test.fakeJob lease=job holder=host-1 token=1 duration=0s err="still busy"`+"\n"+
				`level=INFO msg="job Start" job=*decorator_test.fakeJob duration=2s`+"\n",
			buf.String())
	})
}
