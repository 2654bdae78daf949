package mysqllease

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// freezer is a loopback proxy to the test server that freezes one
// connection the way SIGSTOP or a paused VM freezes the process at its
// end: once armed, the first client command whose text contains the armed
// marker reaches the server, and then nothing more passes in either
// direction. The proxy keeps the server's side of that connection open, as
// a frozen process keeps its sockets, until the test ends: the server sees
// a live session that has sent the command and never reads the reply.
// Other connections pass untouched. It speaks just enough of the MySQL
// protocol to cut the stream at packet boundaries (the test DSN has no TLS
// or compression).
type freezer struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	froze  chan uint32 // the server's id of the frozen session

	mu     sync.Mutex
	marker []byte // armed; nil when not
	links  map[*freezeLink]struct{}
}

// freezeLink is one proxied connection.
type freezeLink struct {
	client, server net.Conn
	id             uint32        // the server's connection id, from its greeting; guarded by the freezer's mu
	frozen         chan struct{} // closed when the link freezes
	closed         chan struct{} // closed when the test ends or either side ends unfrozen
	freezeOnce     sync.Once
	closeOnce      sync.Once
}

// newFreezer starts a freezer to the test server; it closes every
// connection, frozen or not, when t ends.
func newFreezer(t testing.TB) *freezer {
	t.Helper()
	cfg, err := mysql.ParseDSN(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: cfg.Addr, froze: make(chan uint32, 1), links: make(map[*freezeLink]struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// dsn is the test DSN with the freezer as the server's address.
func (f *freezer) dsn(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net, cfg.Addr = "tcp", f.ln.Addr().String()
	return cfg.FormatDSN()
}

// arm freezes the next connection that sends a command containing marker.
func (f *freezer) arm(marker string) {
	f.mu.Lock()
	f.marker = []byte(marker)
	f.mu.Unlock()
}

// frozen returns the server's id of the session that froze, failing t if
// none did.
func (f *freezer) frozen(t testing.TB) uint32 {
	t.Helper()
	select {
	case id := <-f.froze:
		return id
	case <-time.After(5 * time.Second):
		t.Fatal("no connection froze")
		return 0
	}
}

func (f *freezer) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for l := range f.links {
		l.close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", f.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &freezeLink{client: c, server: s, frozen: make(chan struct{}), closed: make(chan struct{})}
		f.mu.Lock()
		f.links[l] = struct{}{}
		f.mu.Unlock()
		f.wg.Add(2)
		go f.toServer(l)
		go f.toClient(l)
	}
}

// toServer forwards the client's packets; after the one that matches the
// armed marker, it forwards nothing more and waits for the test's end.
func (f *freezer) toServer(l *freezeLink) {
	defer f.wg.Done()
	r := bufio.NewReader(l.client)
	for {
		packet, err := readPacket(r)
		if err != nil {
			l.closeUnlessFrozen()
			return
		}
		f.mu.Lock()
		match, id := f.marker != nil && bytes.Contains(packet[4:], f.marker), l.id
		if match {
			f.marker = nil
			l.freezeOnce.Do(func() { close(l.frozen) }) // before the server can reply
		}
		f.mu.Unlock()
		if _, err := l.server.Write(packet); err != nil {
			l.closeUnlessFrozen()
			return
		}
		if match {
			f.froze <- id
			<-l.closed
			return
		}
	}
}

// toClient forwards the server's packets until the link freezes, noting
// the connection id from the server's greeting.
func (f *freezer) toClient(l *freezeLink) {
	defer f.wg.Done()
	r := bufio.NewReader(l.server)
	for first := true; ; first = false {
		packet, err := readPacket(r)
		if err != nil {
			l.closeUnlessFrozen()
			return
		}
		if first { // protocol version, server version\0, connection id
			if i := bytes.IndexByte(packet[5:], 0); i >= 0 && len(packet) >= 5+i+5 {
				f.mu.Lock()
				l.id = binary.LittleEndian.Uint32(packet[5+i+1:])
				f.mu.Unlock()
			}
		}
		select {
		case <-l.frozen:
			<-l.closed
			return
		default:
		}
		if _, err := l.client.Write(packet); err != nil {
			l.closeUnlessFrozen()
			return
		}
	}
}

// readPacket reads one protocol packet: its 4-byte header and payload.
func readPacket(r *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	packet := make([]byte, 4+n)
	copy(packet, h[:])
	_, err := io.ReadFull(r, packet[4:])
	return packet, err
}

// closeUnlessFrozen ends an unfrozen link when either side ends it; a
// frozen link stays open on the server's side until the test ends.
func (l *freezeLink) closeUnlessFrozen() {
	select {
	case <-l.frozen:
		_ = l.client.Close()
	default:
		l.close()
	}
}

func (l *freezeLink) close() {
	l.closeOnce.Do(func() {
		close(l.closed)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}
