package etcdlease

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their watches and closes their clients, and stops
// its embedded etcd.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
