package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// leaderproc is the path of the helper binary that TestMain builds.
var leaderproc string

func TestMain(m *testing.M) {
	pgtest.SaySkipped("tests")
	dir, err := os.MkdirTemp("", "leaderaware-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leaderproc = filepath.Join(dir, "leaderproc")
	build := exec.Command("go", "build", "-o", leaderproc, "./internal/leaderproc")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building leaderproc:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
