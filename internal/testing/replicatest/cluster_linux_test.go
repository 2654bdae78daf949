//go:build linux

package replicatest

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinesKeepPrintTime: the test reads each replica's lines on a
// goroutine of its own, so a handoff's START (b) may be read before the
// STOP (a) that preceded it. The lines keep the time the replicas printed
// them, so no overlap is seen.
func TestLinesKeepPrintTime(t *testing.T) { synctest.Test(t, testLinesKeepPrintTime) }

func testLinesKeepPrintTime(t *testing.T) {
	var outA, outB bytes.Buffer
	printLine := func(out *bytes.Buffer, text string) { fmt.Fprintf(out, "%d %s\n", time.Now().UnixNano(), text) } // as a replica prints
	printLine(&outA, "START a 1")
	printLine(&outA, "STOP a 1")
	time.Sleep(time.Millisecond) // the release and the takeover
	printLine(&outB, "START b 2")

	c := &cluster{t: t, procs: make(map[string]*proc)}
	readAll := func(holder string, out *bytes.Buffer) {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.record(holder, sc.Text())
		}
	}
	// b's lines, printed last, are read first: a's reader is late.
	readAll("b", &outB)
	time.Sleep(time.Millisecond)
	readAll("a", &outA)

	lines, _ := c.snapshot()
	require.Len(t, lines, 3)
	kinds := make([]string, len(lines))
	for i, l := range lines {
		kinds[i] = l.kind + " " + l.holder
	}
	require.Equal(t, []string{"START b", "START a", "STOP a"}, kinds)
	assert.True(t, lines[2].at.Before(lines[0].at), "a's STOP keeps its print time, before b's START")
	v, excused := overlaps(jobRuns(lines), nil, resumeStop)
	assert.Empty(t, v)
	assert.Empty(t, excused)
}

// TestLineWithoutStampIsBad: a line that does not start with the print time
// breaks the protocol.
func TestLineWithoutStampIsBad(t *testing.T) {
	c := &cluster{t: t, procs: make(map[string]*proc)}
	c.record("a", "START a 1")
	c.record("a", "x START a 1")
	lines, _ := c.snapshot()
	for _, l := range lines {
		assert.Equal(t, "BAD", l.kind, "%q", l.text)
	}
}
