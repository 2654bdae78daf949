package etcdlease

import (
	"testing"

	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// TestFxWithStore runs the app of Example_fx on the test's etcd (see
// replicatest.FxWithStore).
func TestFxWithStore(t *testing.T) {
	replicatest.FxWithStore(t, openStore(t, startEtcd(t), WithPrefix(uniquePrefix())))
}
