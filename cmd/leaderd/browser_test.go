package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
	"github.com/leaderaware/leaderaware/statuspage"
)

// TestStatusPageInBrowser runs two instances on one SQLite file, a in a
// child process and b here, and loads b's status page in headless
// Chromium, reading it as rendered (the DOM after its script ran): each
// lease shows a as its holder and b waiting; a lease whose name and holder
// are HTML shows as text, and no script of theirs runs. When a gets
// SIGINT (Ctrl-C), the page shows each lease's handoff from a to b within
// the 2 s, without being reloaded. With LEADERD_SCREENSHOT set to
// a file, it saves a screenshot of the page there.
func TestStatusPageInBrowser(t *testing.T) {
	chromium := browserPath(t)
	db := tempDB(t)
	// A long TTL, so that a keeps its leases on a loaded machine until its
	// SIGINT: it then releases them, and b takes them at once. Without
	// balancing, so that b waits for every lease rather than take its share.
	a := startProcess(t, "-db", db, "-holder", "instance-a", "-ttl", "6s", "-renew", "1s", "-retry", "500ms",
		"-interval", "200ms", "-secret", "test-secret", "-no-balance")
	require.Eventually(t, func() bool {
		p, ok := a.status()
		if !ok || len(p.Jobs) != len(leases) {
			return false
		}
		for _, j := range p.Jobs {
			if !j.Leading {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "a should lead every job\n%s", a.stderrTail())
	b := startInstance(t, withHTTP(fastOptions(db, "instance-b")))

	// A lease that is user input: a name and a holder that are HTML.
	const xssName, xssHolder = `<script>alert(1)</script>`, `<img src=x onerror=alert(2)>`
	other, err := sqlitelease.Open(db)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.TryAcquire(t.Context(), xssName, xssHolder, time.Hour, elector.Lease{})
	require.NoError(t, err)

	tab := startBrowser(t, chromium).open(t, b.url(t)+"/")
	leaseRow := func(p renderedPage, name string) []string {
		for _, row := range p.Leases {
			if len(row) == 7 && row[0] == name {
				return row
			}
		}
		return nil
	}
	page := tab.waitFor(t, 10*time.Second, "b's page should show a as each lease's holder and b waiting for it", func(p renderedPage) bool {
		if len(p.Leases) != len(leases)+1 || p.Error != "" {
			return false
		}
		for _, job := range leases {
			// The cells: lease, holder, token, TTL, renewed, expires, waiting.
			row := leaseRow(p, job)
			if row == nil || row[1] != "instance-a" || !strings.HasPrefix(row[6], "instance-b (") {
				return false
			}
		}
		return true
	})
	row := leaseRow(page, xssName)
	require.NotNil(t, row, "the lease named %s should be listed by its name, as text\n%s", xssName, page.Text)
	assert.Equal(t, xssHolder, row[1], "its holder, as text")
	assert.Equal(t, 0, page.Alerts, "no script of the lease's ran")
	assert.Equal(t, 0, page.Injected, "no element came from the lease's name or holder")
	assert.Contains(t, page.Text, "instance instance-b")
	for _, job := range page.Jobs {
		require.Len(t, job, 9)
		assert.Equal(t, "no", job[2], "b leads nothing yet: %q", job)
		assert.Equal(t, "healthy", job[6])
	}

	signalled := time.Now()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGINT))
	page = tab.waitFor(t, 5*time.Second, "within 2 s of a's SIGINT, b's page should show each lease handed off from a to b", func(p renderedPage) bool {
		handed := map[string]bool{}
		for _, row := range p.Handoffs {
			// The cells: seen, lease, from, to.
			if len(row) == 4 && strings.HasPrefix(row[2], "instance-a #") && strings.HasPrefix(row[3], "instance-b (this instance) #") {
				handed[row[1]] = true
			}
		}
		return len(handed) == len(leases)
	})
	took := time.Since(signalled)
	t.Logf("the handoffs showed on the page %v after the SIGINT", took.Round(time.Millisecond))
	assert.Less(t, took, 2*time.Second, "issue 22: a Ctrl-C on the leader shows as a handoff within 2 s")
	assert.Equal(t, 0, page.Alerts)
	require.NoError(t, a.wait(), "a should exit 0 after SIGINT\n%s", a.stderrTail())
	page = tab.waitFor(t, 3*time.Second, "b's page should show b leading each job", func(p renderedPage) bool {
		n := 0
		for _, row := range p.Jobs {
			if len(row) == 9 && row[2] == "yes" && row[6] == "healthy" {
				n++
			}
		}
		return n == len(leases)
	})
	if out := os.Getenv("LEADERD_SCREENSHOT"); out != "" {
		require.NoError(t, os.WriteFile(out, tab.screenshot(t), 0o644))
	}
}

// TestLeaderdProcess is not a test: it runs leaderd with the arguments in
// LEADERD_PROCESS_ARGS (separated by newlines) and exits, in the child
// process of startProcess.
func TestLeaderdProcess(t *testing.T) {
	args := os.Getenv("LEADERD_PROCESS_ARGS")
	if args == "" {
		t.Skip("the child process of startProcess")
	}
	os.Exit(run(context.Background(), strings.Split(args, "\n"), os.Stderr, os.Stdout))
}

// process is leaderd in a child process, serving HTTP at url.
type process struct {
	cmd    *exec.Cmd
	url    string
	stderr string // the file of its stderr
	done   bool   // wait has returned
}

// startProcess starts leaderd with args and -http on a free port in a
// child process (the test binary, in TestLeaderdProcess), and kills it
// when t ends if it still runs.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	u := freeURL(t)
	args = append(args, "-http", u.Host)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderdProcess$")
	cmd.Env = append(os.Environ(), "LEADERD_PROCESS_ARGS="+strings.Join(args, "\n"))
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stderr, stderr
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, url: u.String(), stderr: stderr.Name()}
	t.Cleanup(func() {
		if !p.done {
			_ = cmd.Process.Kill()
			_ = p.wait()
		}
	})
	return p
}

// wait waits for the process to exit.
func (p *process) wait() error {
	p.done = true
	return p.cmd.Wait()
}

// status returns the process's /leases, if it serves it yet.
func (p *process) status() (statuspage.Status, bool) {
	var st statuspage.Status
	resp, err := httpClient.Get(p.url + "/leases")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil
}

// stderrTail returns the end of the process's stderr.
func (p *process) stderrTail() string {
	out, _ := os.ReadFile(p.stderr)
	return string(out[max(0, len(out)-4000):])
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
// the cells of each row of its tables, its error line and all its text;
// how many times a script called alert, and how many script, img or other
// elements with an event handler are in its tables.
type renderedPage struct {
	Leases, Jobs, Handoffs [][]string
	Error, Text            string
	Alerts, Injected       int
}

// readPage is the script that returns a renderedPage as JSON.
const readPage = `(() => {
	const rows = id => [...document.querySelectorAll("#" + id + " tbody tr")]
		.filter(tr => tr.cells.length > 1)
		.map(tr => [...tr.cells].map(td => td.innerText.trim()));
	const error = document.getElementById("error");
	return JSON.stringify({
		Leases: rows("leases"), Jobs: rows("jobs"), Handoffs: rows("handoffs"),
		Error: error.hidden ? "" : error.innerText, Text: document.body.innerText,
		Alerts: window.__alerts || 0, Injected: document.querySelectorAll("main script, main img, main [onerror]").length,
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

// open opens url in a new tab, where every call of alert is counted in
// window.__alerts instead of shown.
func (b *browser) open(t *testing.T, url string) *tab {
	t.Helper()
	var target struct{ TargetID string }
	require.NoError(t, b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target))
	var attached struct{ SessionID string }
	require.NoError(t, b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached))
	tb := &tab{b: b, session: attached.SessionID}
	require.NoError(t, b.call(tb.session, "Page.addScriptToEvaluateOnNewDocument", map[string]any{
		"source": "window.__alerts = 0; window.alert = () => { window.__alerts++; };",
	}, nil))
	require.NoError(t, b.call(tb.session, "Page.navigate", map[string]any{"url": url}, nil))
	return tb
}

// screenshot returns a PNG of the whole page.
func (tb *tab) screenshot(t *testing.T) []byte {
	t.Helper()
	require.NoError(t, tb.b.call(tb.session, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": 1400, "height": 800, "deviceScaleFactor": 1, "mobile": false,
	}, nil))
	var shot struct{ Data []byte }
	require.NoError(t, tb.b.call(tb.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot))
	require.True(t, bytes.HasPrefix(shot.Data, []byte("\x89PNG")), "a PNG")
	return shot.Data
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
