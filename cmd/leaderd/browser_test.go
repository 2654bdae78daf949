package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatusPageInBrowser loads the status page of the second of two
// instances on one SQLite file in headless Chromium, and reads the page
// as rendered (the DOM after its script ran): it lists each lease with the
// first instance as its holder; when the first instance stops, within a
// few seconds the page shows the second as every lease's holder, and its
// elections among the transitions, without being reloaded.
func TestStatusPageInBrowser(t *testing.T) {
	chromium := browserPath(t)
	db := tempDB(t)
	a := startInstance(t, withHTTP(fastOptions(db, "instance-a")))
	require.Eventually(t, func() bool {
		for _, job := range leases {
			if a.rec.leads(job) != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a should lead every job\n%s", a.rec)
	b := startInstance(t, withHTTP(fastOptions(db, "instance-b")))

	tab := startBrowser(t, chromium).open(t, b.url(t)+"/")
	shows := func(holder string) func(p renderedPage) bool {
		return func(p renderedPage) bool {
			if len(p.Leases) != len(leases) || p.Error != "" {
				return false
			}
			for i, job := range leases {
				// The cells: lease, holder, token, version, renewed, expires.
				row := p.Leases[i]
				if len(row) != 6 || row[0] != job || strings.TrimSuffix(row[1], " (this instance)") != holder {
					return false
				}
			}
			return true
		}
	}
	tab.waitFor(t, 10*time.Second, "the page should list each lease with holder instance-a", shows("instance-a"))
	page := tab.waitFor(t, time.Second, "the page should name this instance", func(p renderedPage) bool {
		return strings.Contains(p.Text, "instance instance-b on sqlite")
	})
	require.Empty(t, page.Transitions, "b has won no election yet")

	a.stopAndWait(t)
	page = tab.waitFor(t, 5*time.Second, "within a few seconds of a's stop, the page should list each lease with holder instance-b", shows("instance-b"))
	for _, row := range page.Leases {
		require.Equal(t, "instance-b (this instance)", row[1])
	}
	tab.waitFor(t, 3*time.Second, "the page should list b's elections among its transitions", func(p renderedPage) bool {
		elected := map[string]bool{}
		for _, row := range p.Transitions {
			if len(row) == 5 && row[2] == "elected" {
				elected[row[1]] = true
			}
		}
		return len(elected) == len(leases)
	})
}

// browserPath returns the path of Chromium. Without one it skips t, unless
// CI is set: then it fails (.ci/run installs the chromium package).
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and no Chromium is installed: .ci/run installs it with apt-get install chromium")
	}
	t.Skip("no Chromium: apt-get install chromium to test the status page in a browser")
	return ""
}

// renderedPage is the status page as the browser rendered it: the text of
// the cells of each row of its tables, its error line and all its text.
type renderedPage struct {
	Leases, Jobs, Transitions [][]string
	Error, Text               string
}

// readPage is the script that returns a renderedPage as JSON.
const readPage = `(() => {
	const rows = id => [...document.querySelectorAll("#" + id + " tbody tr")]
		.filter(tr => tr.cells.length > 1)
		.map(tr => [...tr.cells].map(td => td.innerText.trim()));
	const error = document.getElementById("error");
	return JSON.stringify({
		Leases: rows("leases"), Jobs: rows("jobs"), Transitions: rows("transitions"),
		Error: error.hidden ? "" : error.innerText, Text: document.body.innerText,
	});
})()`

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: it reads commands on its fd 3 and writes
// replies and events on its fd 4, each a JSON message ending in a NUL
// byte), which needs no WebSocket and no port.
type browser struct {
	cmd     *exec.Cmd
	send    *os.File        // chromium's fd 3
	recv    *os.File        // chromium's fd 4
	replies chan cdpMessage // replies to commands; closed when recv ends
	reader  sync.WaitGroup  // the goroutine that reads recv
	closing chan struct{}   // closed by close: the reader drops what it reads
	exited  chan struct{}   // closed when chromium has exited
	stderr  string          // the file of chromium's stderr
	nextID  int
}

// cdpMessage is a DevTools protocol message: a command, a reply or an
// event.
type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// startBrowser starts Chromium at path, headless with a fresh profile, and
// closes it when t ends.
func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	dir := t.TempDir()
	cmdR, cmdW, err := os.Pipe()
	require.NoError(t, err)
	replyR, replyW, err := os.Pipe()
	require.NoError(t, err)
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	cmd := exec.Command(path,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1100,800",
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, replyW} // fds 3 and 4
	cmd.Stdout, cmd.Stderr = stderr, stderr
	err = cmd.Start()
	cmdR.Close()
	replyW.Close()
	stderr.Close()
	if err != nil {
		cmdW.Close()
		replyR.Close()
		t.Fatalf("start %s: %v", path, err)
	}
	b := &browser{
		cmd: cmd, send: cmdW, recv: replyR, stderr: stderr.Name(),
		replies: make(chan cdpMessage), closing: make(chan struct{}), exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	b.reader.Add(1)
	go b.read()
	t.Cleanup(func() { b.close(t) })
	return b
}

// read passes the replies that chromium writes to b.replies, and drops
// the events, until its pipe ends.
func (b *browser) read() {
	defer b.reader.Done()
	defer close(b.replies)
	r := bufio.NewReader(b.recv)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue
		}
		select {
		case b.replies <- m:
		case <-b.closing:
		}
	}
}

// call sends the command method with params, in the target session (""
// for the browser), and decodes the reply's result into result, if not
// nil. Commands are sent one at a time, from the test's goroutine.
func (b *browser) call(session, method string, params, result any) error {
	b.nextID++
	msg, err := json.Marshal(cdpMessage{ID: b.nextID, SessionID: session, Method: method, Params: params})
	if err != nil {
		return err
	}
	if _, err := b.send.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-b.replies:
			if !ok {
				return fmt.Errorf("%s: chromium closed its pipe; its stderr:\n%s", method, b.stderrTail())
			}
			if m.ID != b.nextID {
				continue // the reply to an earlier command that timed out
			}
			if m.Error != nil {
				return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
			}
			if result == nil {
				return nil
			}
			return json.Unmarshal(m.Result, result)
		case <-timeout:
			return fmt.Errorf("%s: no reply within 20s", method)
		}
	}
}

// stderrTail returns the end of chromium's stderr.
func (b *browser) stderrTail() string {
	out, _ := os.ReadFile(b.stderr)
	return string(out[max(0, len(out)-4000):])
}

// close asks chromium to exit, kills it if it has not within 10 s, and
// waits for it and for the reading goroutine.
func (b *browser) close(t *testing.T) {
	_ = b.call("", "Browser.close", nil, nil)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		t.Logf("chromium did not exit within 10s of Browser.close; killing it")
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	close(b.closing)
	b.send.Close()
	b.recv.Close() // ends a read that a child process holding fd 4 would keep open
	b.reader.Wait()
}

// tab is a page open in the browser.
type tab struct {
	b       *browser
	session string
}

// open opens url in a new tab.
func (b *browser) open(t *testing.T, url string) *tab {
	t.Helper()
	var target struct{ TargetID string }
	require.NoError(t, b.call("", "Target.createTarget", map[string]any{"url": url}, &target))
	var attached struct{ SessionID string }
	require.NoError(t, b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached))
	return &tab{b: b, session: attached.SessionID}
}

// read returns the page as rendered now.
func (tb *tab) read() (renderedPage, error) {
	var res struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := tb.b.call(tb.session, "Runtime.evaluate", map[string]any{"expression": readPage, "returnByValue": true}, &res)
	switch {
	case err != nil:
		return renderedPage{}, err
	case res.ExceptionDetails != nil:
		return renderedPage{}, errors.New(res.ExceptionDetails.Text)
	}
	var p renderedPage
	err = json.Unmarshal([]byte(res.Result.Value), &p)
	return p, err
}

// waitFor reads the page every 100 ms until ok accepts it, and returns it;
// after timeout it fails t with msg and the page's text. A page that cannot
// be read yet (still loading) is not accepted.
func (tb *tab) waitFor(t *testing.T, timeout time.Duration, msg string, ok func(renderedPage) bool) renderedPage {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p, err := tb.read()
		if err == nil && ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (waited %v)\nread error: %v\nthe page's text:\n%s", msg, timeout, err, p.Text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
