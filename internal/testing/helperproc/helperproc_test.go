package helperproc

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Main(map[string]func([]string) error{
		"echo": func(args []string) error { fmt.Println(strings.Join(args, " ")); return nil },
		"fail": func([]string) error { return errors.New("it failed") },
	})
	goleak.VerifyTestMain(m)
}

// TestModes: Command runs this test binary in a mode, with its arguments;
// a mode's error, or an unknown mode, makes it exit 1 and say why.
func TestModes(t *testing.T) {
	out, err := Command(t, "echo", "-a", "b").Output()
	require.NoError(t, err)
	assert.Equal(t, "-a b\n", string(out))

	for mode, want := range map[string]string{
		"fail":  "helperproc fail: it failed\n",
		"nope":  `helperproc nope: unknown mode "nope": want one of chaos, contender, follower, holder, replica` + "\n",
		"chaos": "helperproc chaos: need -holder\n",
	} {
		cmd := Command(t, mode)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, mode)
		assert.Equal(t, 1, exit.ExitCode(), mode)
		assert.Equal(t, want, stderr.String(), mode)
	}
}

// TestStampedLines: a stamped line starts with the wall clock in Unix
// nanoseconds, as replicatest reads a replica's lines.
func TestStampedLines(t *testing.T) {
	var b bytes.Buffer
	before := time.Now()
	(&lineWriter{w: &b, stamped: true}).printf("START %s %d", "a", 7)
	stamp, rest, ok := strings.Cut(b.String(), " ")
	require.True(t, ok)
	nanos, err := strconv.ParseInt(stamp, 10, 64)
	require.NoError(t, err)
	assert.False(t, time.Unix(0, nanos).Before(before))
	assert.Equal(t, "START a 7\n", rest)

	b.Reset()
	(&lineWriter{w: &b}).printf("OPEN %s %d", "a", 0)
	assert.Equal(t, "OPEN a 0\n", b.String())
}
