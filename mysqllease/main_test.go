package mysqllease

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their pollers and closes their pools. Started by
// the multi-process tests as one of their child processes (see
// proc_linux_test.go), the test binary runs that child instead of the
// tests.
func TestMain(m *testing.M) {
	if runChild != nil && os.Getenv(childEnv) != "" {
		os.Exit(runChild(os.Getenv(childEnv), os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// childEnv names the environment variable that makes the test binary a
// child process of a multi-process test; its value says which child.
const childEnv = "MYSQLLEASE_TEST_CHILD"

// runChild runs the child named kind with args and returns its exit code.
// It is set on the systems that run the multi-process tests.
var runChild func(kind string, args []string) int
