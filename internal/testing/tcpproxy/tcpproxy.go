// Package tcpproxy is a loopback TCP proxy for fault tests: it forwards
// connections to a server and can freeze, delay or cut them, as a dead
// network path, a slow one or a restarted middlebox would.
package tcpproxy

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards every connection accepted on [Proxy.Addr] to its target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*link]struct{}
	delay  time.Duration
	closed bool
}

// link is one proxied connection: client side and server side.
type link struct {
	client, server net.Conn
	frozen         chan struct{} // closed to thaw; nil when not frozen
	closeOnce      sync.Once
	closed         chan struct{} // closed by close: frees a pipe held by a freeze
}

// New listens on a free loopback port and forwards to target (host:port).
// Close stops it and waits for its goroutines.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops forwarding on every open connection, in both directions,
// without closing it: reads on either side block, as on a black-holed
// path. New connections still pass. Thaw undoes it.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		if l.frozen == nil {
			l.frozen = make(chan struct{})
		}
	}
}

// Thaw resumes forwarding on the connections Freeze stopped.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		if l.frozen != nil {
			close(l.frozen)
			l.frozen = nil
		}
	}
}

// Delay holds every chunk of data for d before forwarding it (0 for none).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Cut closes every open connection, frozen or not, as a restarted
// middlebox would.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.close()
		if l.frozen != nil {
			close(l.frozen)
			l.frozen = nil
		}
	}
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s, closed: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, c, s)
		go p.pipe(l, s, c)
	}
}

// pipe copies from src to dst, chunk by chunk, honouring freezes and delay.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen, delay := l.frozen, p.delay
			p.mu.Unlock()
			if frozen != nil {
				select {
				case <-frozen: // thawed
				case <-l.closed: // cut, or the other direction ended
					return
				}
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.closed)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}
