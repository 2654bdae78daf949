package leaderotel_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests run electors, whose terms renew on a goroutine of their own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
