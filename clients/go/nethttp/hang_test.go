package nethttp_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// hangProxy is the Redis of a `redis: hang` case (conformance/README.md):
// a listener that accepts connections and never answers, holding what it
// is sent, until join: then every connection is joined to the real
// server, the held bytes first, and later ones are joined at once (until
// hang again).
type hangProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	hanging bool
	held    []*heldConn
}

// heldConn is one client connection: its bytes are held until up is set.
type heldConn struct {
	c       net.Conn
	mu      sync.Mutex
	pending []byte
	up      net.Conn
}

func startHangProxy(t *testing.T, target string) *hangProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{ln: ln, target: target, hanging: true}
	t.Cleanup(p.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *hangProxy) addr() string { return p.ln.Addr().String() }

func (p *hangProxy) serve(c net.Conn) {
	hc := &heldConn{c: c}
	p.mu.Lock()
	hanging := p.hanging
	p.held = append(p.held, hc)
	p.mu.Unlock()
	if !hanging {
		hc.join(p.target)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			hc.mu.Lock()
			if hc.up != nil {
				_, _ = hc.up.Write(buf[:n])
			} else {
				hc.pending = append(hc.pending, buf[:n]...)
			}
			hc.mu.Unlock()
		}
		if err != nil {
			hc.mu.Lock()
			if hc.up != nil {
				_ = hc.up.Close()
			}
			hc.mu.Unlock()
			return
		}
	}
}

// join connects the held connection to the server, its held bytes first.
func (hc *heldConn) join(target string) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.up != nil {
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		_ = hc.c.Close()
		return
	}
	_, _ = up.Write(hc.pending)
	hc.pending, hc.up = nil, up
	go func() {
		_, _ = io.Copy(hc.c, up)
		_ = hc.c.Close()
	}()
}

// setHanging: false joins every connection to the server; true makes the
// connections made from then on hang.
func (p *hangProxy) setHanging(hang bool) {
	p.mu.Lock()
	p.hanging = hang
	held := append([]*heldConn(nil), p.held...)
	p.mu.Unlock()
	if !hang {
		for _, hc := range held {
			hc.join(p.target)
		}
	}
}

func (p *hangProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, hc := range p.held {
		_ = hc.c.Close()
		hc.mu.Lock()
		if hc.up != nil {
			_ = hc.up.Close()
		}
		hc.mu.Unlock()
	}
}
