package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes lines until its listener closes.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func roundTrip(c net.Conn, within time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestFreezeBlocksOpenConnectionsOnly(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := roundTrip(old, 5*time.Second); err != nil {
		t.Fatalf("before the freeze: %v", err)
	}
	p.Freeze()
	if err := roundTrip(old, 200*time.Millisecond); err == nil {
		t.Fatal("a frozen connection answered")
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := roundTrip(fresh, 5*time.Second); err != nil {
		t.Fatalf("a new connection after the freeze: %v", err)
	}
	p.Cut()
	if err := roundTrip(old, 5*time.Second); err == nil {
		t.Fatal("a cut connection answered")
	}
}

func TestDelay(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Delay(100 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("a round trip through a 100ms delay each way took %v", took)
	}
}

// TestCloseWhileFrozenWithDataInFlight: data held by a freeze in one
// direction while the server ends the other must not keep Close waiting.
func TestCloseWhileFrozenWithDataInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() { // a server that hangs up after 200ms
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
		c.Close()
	}()
	p, err := New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // the proxy has the link
	p.Freeze()
	_, _ = c.Write([]byte("held\n")) // read by the proxy, held by the freeze
	<-served
	time.Sleep(50 * time.Millisecond) // the server-to-client pipe has ended
	done := make(chan error)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a pipe held by a freeze")
	}
}
