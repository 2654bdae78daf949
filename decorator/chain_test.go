package decorator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
)

// tracer records the order in which tagged middleware see a Start.
type tracer struct{ list []string }

// tag returns a middleware that records name around next's Start.
func (tr *tracer) tag(name string) decorator.Middleware {
	return func(next decorator.Job) decorator.Job { return &tagJob{next: next, name: name, tr: tr} }
}

// run starts c.Then(a job that records "job") and returns the trace.
func (tr *tracer) run(t *testing.T, c decorator.Chain) []string {
	t.Helper()
	tr.list = nil
	require.NoError(t, c.Then(&tagJob{name: "job", tr: tr}).Start(context.Background()))
	return tr.list
}

type tagJob struct {
	next decorator.Job // nil for the innermost job
	name string
	tr   *tracer
}

func (j *tagJob) Start(ctx context.Context) error {
	if j.next == nil {
		j.tr.list = append(j.tr.list, j.name)
		return nil
	}
	j.tr.list = append(j.tr.list, j.name+">")
	err := j.next.Start(ctx)
	j.tr.list = append(j.tr.list, "<"+j.name)
	return err
}

func (j *tagJob) Stop(context.Context) error { return nil }

func (j *tagJob) Unwrap() decorator.Job {
	if j.next == nil {
		return nil
	}
	return j.next
}

func TestChainOrder(t *testing.T) {
	tr := &tracer{}
	c := decorator.NewChain(tr.tag("a"), nil, tr.tag("b"))
	require.Equal(t, 2, c.Len(), "nil middleware are skipped")
	require.Equal(t, []string{"a>", "b>", "job", "<b", "<a"}, tr.run(t, c), "first is outermost")
	require.Equal(t, []string{"job"}, tr.run(t, decorator.Chain{}))
	require.Equal(t, []string{"job"}, tr.run(t, decorator.NewChain()))
	require.Equal(t, []string{"a>", "job", "<a"}, tr.run(t, decorator.Chain{}.Append(nil, tr.tag("a"))))
}

func TestChainIsImmutable(t *testing.T) {
	tr := &tracer{}
	args := []decorator.Middleware{tr.tag("a"), tr.tag("b"), tr.tag("c")}
	c0 := decorator.NewChain(args...)
	args[0] = tr.tag("z") // NewChain copied its arguments
	c1 := c0.Append(tr.tag("d"))
	// Append to c1 twice: with a naive append(c.mws, ...) c1's spare
	// capacity would be shared and the second Append would overwrite the first.
	c2 := c1.Append(tr.tag("e"))
	c3 := c1.Append(tr.tag("f"))
	c4 := c0.Append()
	require.Equal(t, []string{"a>", "b>", "c>", "job", "<c", "<b", "<a"}, tr.run(t, c0))
	require.Equal(t, []string{"a>", "b>", "c>", "d>", "job", "<d", "<c", "<b", "<a"}, tr.run(t, c1))
	require.Equal(t, []string{"a>", "b>", "c>", "d>", "e>", "job", "<e", "<d", "<c", "<b", "<a"}, tr.run(t, c2))
	require.Equal(t, []string{"a>", "b>", "c>", "d>", "f>", "job", "<f", "<d", "<c", "<b", "<a"}, tr.run(t, c3))
	require.Equal(t, tr.run(t, c0), tr.run(t, c4))
}

func TestDepth(t *testing.T) {
	tr := &tracer{}
	plain := &fakeJob{}
	require.Equal(t, 0, decorator.Depth(plain))
	require.Equal(t, 0, decorator.Depth(nil))
	require.Equal(t, 3, decorator.Depth(decorator.NewChain(tr.tag("a"), tr.tag("b"), tr.tag("c")).Then(plain)))
	e := &fakeElector{}
	require.Equal(t, 1, decorator.Depth(decorator.Decorate[decorator.Job](plain, e)))
	require.Equal(t, 4, decorator.Depth(decorator.Decorate[decorator.Job](plain, e,
		decorator.WithMiddleware(decorator.Recover(), decorator.Log(discard)),
		decorator.WithMiddleware(decorator.Log(discard)))))
	// A middleware without Unwrap ends the count.
	opaque := func(next decorator.Job) decorator.Job { return struct{ decorator.Job }{next} }
	require.Equal(t, 2, decorator.Depth(decorator.Decorate[decorator.Job](plain, e,
		decorator.WithMiddleware(decorator.Recover(), opaque, decorator.Recover()))))
}
