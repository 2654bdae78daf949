package sqlitelease_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// runChild, if set (on Linux), runs this test binary as a child process of
// a multi-process test instead of the tests, when childEnv is set.
var runChild func() int

// childEnv names the environment variable that makes this test binary a
// child process (see crash_linux_test.go).
const childEnv = "LEADERAWARE_SQLITELEASE_CHILD"

func TestMain(m *testing.M) {
	if runChild != nil && os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
