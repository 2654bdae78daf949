package pricerefresh_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
)

func TestSimulatedSourceIsDeterministic(t *testing.T) {
	a := pricerefresh.NewSimulatedSource(42, nil)
	b := pricerefresh.NewSimulatedSource(42, nil)
	c := pricerefresh.NewSimulatedSource(43, nil)
	var differs bool
	for i := range 100 {
		pa, err := a.Prices(t.Context())
		require.NoError(t, err)
		pb, err := b.Prices(t.Context())
		require.NoError(t, err)
		pc, err := c.Prices(t.Context())
		require.NoError(t, err)
		require.Equal(t, pa, pb, "step %d", i)
		differs = differs || !assert.ObjectsAreEqual(pa, pc)
		require.Len(t, pa, 3)
		assert.Equal(t, []string{"BTC", "ETH", "SOL"}, []string{pa[0].Symbol, pa[1].Symbol, pa[2].Symbol})
		for _, p := range pa {
			assert.Positive(t, p.Value)
		}
	}
	assert.True(t, differs, "another seed gives the same walk")
}

func TestSimulatedSourceWalks(t *testing.T) {
	src := pricerefresh.NewSimulatedSource(1, map[string]float64{"X": 100})
	p1, _ := src.Prices(t.Context())
	p2, _ := src.Prices(t.Context())
	assert.NotEqual(t, p1, p2)
	assert.InDelta(t, 100, p1[0].Value, 10, "one step moves about 1%%")
}

func TestSimulatedSourceHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := pricerefresh.NewSimulatedSource(1, nil).Prices(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}
