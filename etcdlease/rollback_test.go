package etcdlease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// rollbackCase is two Stores on a prefix of the test's own, and a put of an
// older lease value by hand, as an operator restoring a saved key would do.
// A put cannot lower the key's revision, which is the version: only the
// token and holder go back.
func rollbackCase(t *testing.T) rollbacktest.Case {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder := openStore(t, srv, WithPrefix(prefix))
	raw := rawClient(t, srv)
	return rollbacktest.Case{
		Holder:    holder,
		Candidate: openStore(t, srv, WithPrefix(prefix)),
		Write: func(t *testing.T, l elector.Lease) {
			v := record{Token: l.Token, Holder: l.Holder, TTL: l.TTL.String(), Written: clock.Wall().UTC()}.encode()
			_, err := raw.Put(testCtx(t), holder.Key(l.Name), v)
			require.NoError(t, err)
		},
	}
}

// TestRollback: keys put back by hand (see rollbacktest).
func TestRollback(t *testing.T) { rollbacktest.Run(t, rollbackCase) }
