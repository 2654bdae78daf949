package decorator_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/decoratable"
)

type valueJob struct{}

func (valueJob) Start(context.Context) error { return nil }
func (valueJob) Stop(context.Context) error  { return nil }

type namedJob interface {
	decorator.Job
	Name() string
}

type errUnwrapJob interface {
	decorator.Job
	Unwrap() error
}

type privateJob interface {
	decorator.Job
	private()
}

type aliasJob decorator.Job

type startStop interface {
	Start(context.Context) error
	Stop(context.Context) error
}

type fullJob interface {
	decorator.Job
	Unwrap() decorator.Job
	fmt.Stringer
}

const typeErr = "decorator.Decorate: cannot return the decorated job as %s: J must be an interface type with only Start and Stop (%s)"

func TestDecorateRefusesTypes(t *testing.T) {
	e := &fakeElector{}
	for _, tc := range []struct {
		name     string
		decorate func()
		check    func() error
		want     string
	}{
		{"pointer", func() { decorator.Decorate(&fakeJob{}, e) }, decoratable.Check[*fakeJob],
			fmt.Sprintf(typeErr, "*decorator_test.fakeJob", "it is a pointer")},
		{"struct", func() { decorator.Decorate(valueJob{}, e) }, decoratable.Check[valueJob],
			fmt.Sprintf(typeErr, "decorator_test.valueJob", "it is a struct")},
		{"extra method", func() { decorator.Decorate[namedJob](nil, e) }, decoratable.Check[namedJob],
			fmt.Sprintf(typeErr, "decorator_test.namedJob", "it has method Name that a decorated job does not")},
		{"other Unwrap", func() { decorator.Decorate[errUnwrapJob](nil, e) }, decoratable.Check[errUnwrapJob],
			fmt.Sprintf(typeErr, "decorator_test.errUnwrapJob", "its method Unwrap is func() error; a decorated job's is func() decorator.Job")},
		{"unexported method", func() { decorator.Decorate[privateJob](nil, e) }, decoratable.Check[privateJob],
			fmt.Sprintf(typeErr, "decorator_test.privateJob", "it has method private that a decorated job does not")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.check(), tc.want)
			require.PanicsWithError(t, tc.want, tc.decorate)
		})
	}
}

func TestDecorateAcceptsInterfaces(t *testing.T) {
	require.NoError(t, decoratable.Check[decorator.Job]())
	require.NoError(t, decoratable.Check[aliasJob]())
	require.NoError(t, decoratable.Check[startStop]())
	require.NoError(t, decoratable.Check[interface {
		Start(context.Context) error
		Stop(context.Context) error
	}]())
	require.NoError(t, decoratable.Check[fullJob]())

	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		inner := &fakeJob{}
		var x aliasJob = inner
		got := decorator.Decorate(x, newElector(t, store, "a"))
		require.NoError(t, got.Start(ctx))
		synctest.Wait()
		require.True(t, inner.running())
		require.NoError(t, got.Stop(ctx))
		require.False(t, inner.running())

		var s startStop = &fakeJob{}
		require.NotNil(t, decorator.Decorate(s, newElector(t, store, "b")))
		// A decorated job can be decorated again, as the full interface.
		inside := decorator.Decorate[fullJob](decorator.Decorate[fullJob](nil, &fakeElector{}), newElector(t, store, "c"))
		require.Equal(t, `leader job *decorator.decorated (lease "job")`, inside.String())
		require.Equal(t, 1, decorator.Depth(inside.Unwrap()))
	})
}

func TestBadInputMakesStartFail(t *testing.T) {
	store := elector.NewMemoryStore()
	e, err := elector.New(store, leaseName, elector.Config{Holder: "a"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		job  decorator.Job
		e    elector.Elector
		opts []decorator.Option
		want []string
	}{
		{"nil elector", &fakeJob{}, nil, nil, []string{"the elector of *decorator_test.fakeJob is nil"}},
		{"nil job", nil, e, nil, []string{"job is nil"}},
		{"nil from middleware", &fakeJob{}, e, []decorator.Option{decorator.WithMiddleware(func(decorator.Job) decorator.Job { return nil })}, []string{"middleware chain returned a nil job for *decorator_test.fakeJob"}},
		{"negative start timeout", &fakeJob{}, e, []decorator.Option{decorator.WithStartTimeout(-time.Second)}, []string{"WithStartTimeout(-1s)", "-1s"}},
		{"zero stop timeout", &fakeJob{}, e, []decorator.Option{decorator.WithStopTimeout(0)}, []string{"WithStopTimeout(0s)"}},
		{"min above max", &fakeJob{}, e, []decorator.Option{decorator.WithBackoff(5*time.Second, time.Second)}, []string{"WithBackoff(5s, 1s)", "below the minimum"}},
		{"zero backoff", &fakeJob{}, e, []decorator.Option{decorator.WithBackoff(0, time.Second)}, []string{"WithBackoff(0s, 1s)", "positive"}},
		{"nil logger", &fakeJob{}, e, []decorator.Option{decorator.WithLogger(nil)}, []string{"WithLogger(nil)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d decorator.Job
			require.NotPanics(t, func() { d = decorator.Decorate(tc.job, tc.e, tc.opts...) })
			err := d.Start(context.Background())
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Error(t, d.Start(context.Background()), "every Start fails")
			require.NoError(t, d.Stop(context.Background()))
		})
	}
}

func TestStartIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		h := &hookLog{}
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"), decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Stop(ctx), "Stop before Start")
		for range 3 {
			require.NoError(t, d.Start(ctx))
		}
		synctest.Wait()
		require.EqualValues(t, 1, job.starts.Load())
		require.EqualValues(t, 1, store.acquires.Load(), "one campaign")
		require.NoError(t, d.Stop(ctx))
		require.NoError(t, d.Stop(ctx))
		require.Equal(t, []string{"elected 1", "demoted 1"}, h.ev.all())
		require.Equal(t, []error{elector.ErrResigned}, h.getCauses())
	})
}

func TestPanickingHooksAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var logBuf syncBuffer
		h := &hookLog{}
		job := &fakeJob{stopFn: func(context.Context) error { panic("stop boom") }}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithLogger(slog.New(slog.NewTextHandler(&logBuf, nil))),
			decorator.WithHooks(decorator.Hooks{
				OnElected: func(context.Context, elector.Term) { panic("elected boom") },
				OnDemoted: func(context.Context, elector.Term, error) { panic("demoted boom") },
			}),
			decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.True(t, job.running())
		require.NoError(t, d.Stop(ctx))
		require.Equal(t, []string{"elected 1", "error", "demoted 1"}, h.ev.all(), "later hooks still run")
		var pe *decorator.PanicError
		require.ErrorAs(t, h.getErrs()[0], &pe)
		require.Equal(t, "Stop", pe.Method)
		require.EqualValues(t, 2, job.stops.Load(), "the inner Stop is tried again")
		require.Zero(t, store.releases.Load(), "a job whose Stop panicked may still run: its lease is abandoned, not released")
		require.Equal(t, []error{elector.ErrAbandoned}, h.getCauses())
		out := logBuf.String()
		assert.Contains(t, out, "hook=OnElected")
		assert.Contains(t, out, "hook=OnDemoted")
		assert.Contains(t, out, "elected boom")
	})
}

func TestErrorsAreLoggedWithoutOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var logBuf syncBuffer
		job := &fakeJob{}
		job.startFn = func(context.Context) error {
			if job.starts.Load() == 1 {
				return fmt.Errorf("no config")
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"),
			decorator.WithLogger(slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.NoError(t, d.Stop(ctx))
		out := logBuf.String()
		assert.Contains(t, out, `level=INFO msg=elected job=*decorator_test.fakeJob lease=job holder=a token=1 trust=2.7s`)
		assert.Contains(t, out, `level=ERROR msg="leader job error" job=*decorator_test.fakeJob lease=job holder=a token=1 err="decorator: start *decorator_test.fakeJob: no config"`)
		assert.Contains(t, out, `level=WARN msg=demoted job=*decorator_test.fakeJob lease=job holder=a token=1 cause=start_failed held=0s err="decorator: start *decorator_test.fakeJob: no config"`)
	})
}

func TestDecorateMutatesNothing(t *testing.T) {
	mws := []decorator.Middleware{decorator.Recover(), decorator.Recover()}
	opt := decorator.WithMiddleware(mws...)
	mws[1] = nil // the option copied its arguments
	e := &fakeElector{}
	d1 := decorator.Decorate[decorator.Job](&fakeJob{}, e, opt)
	d2 := decorator.Decorate[decorator.Job](&fakeJob{}, e, opt, opt)
	require.Equal(t, 3, decorator.Depth(d1), "one option used twice builds the same chain")
	require.Equal(t, 5, decorator.Depth(d2))
	require.Equal(t, 3, decorator.Depth(decorator.Decorate[decorator.Job](&fakeJob{}, e, opt)))
}

// TestNilPointerJobAndElector: a nil pointer in a non-nil interface is not
// detected by Decorate; the first call on it panics, and the panic is
// recovered and reported, and a term won meanwhile resigned.
func TestNilPointerJobAndElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		h := &hookLog{}
		opts := []decorator.Option{decorator.WithHooks(h.hooks()), decorator.WithBackoff(time.Minute, time.Minute)}
		nilJob := decorator.Decorate[decorator.Job]((*fakeJob)(nil), newElector(t, store, "a"), opts...)
		nilElector := decorator.Decorate[decorator.Job](&fakeJob{}, (*elector.LeaseElector)(nil), opts...)
		require.NoError(t, nilJob.Start(ctx))
		require.NoError(t, nilElector.Start(ctx))
		synctest.Wait()
		require.NoError(t, nilJob.Stop(ctx))
		require.NoError(t, nilElector.Stop(ctx))
		var methods []string
		for _, err := range h.getErrs() {
			var pe *decorator.PanicError
			require.ErrorAs(t, err, &pe)
			methods = append(methods, pe.Method)
		}
		require.ElementsMatch(t, []string{"Start", "Campaign"}, methods)
		require.EqualValues(t, 1, store.releases.Load(), "the term of the nil job is resigned")
	})
}
