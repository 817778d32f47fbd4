package main

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// balancer is a TCP load balancer for tests: each connection it accepts
// goes to the next backend in turn, or to the one after it when that one
// does not answer, as a load balancer in front of pgtables replicas does
// when a replica dies. A connection lives as long as both ends keep it.
type balancer struct {
	ln       net.Listener
	backends []string

	mu     sync.Mutex
	next   int
	served []int // connections each backend took
	conns  map[net.Conn]struct{}
	done   bool
	wg     sync.WaitGroup
}

// startBalancer listens on a free loopback port in front of backends; the
// test's end closes it and every connection through it.
func startBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, served: make([]int, len(backends)), conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

// addr is where clients connect.
func (b *balancer) addr() string { return b.ln.Addr().String() }

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.proxy(c)
		}()
	}
}

// proxy connects c to a backend and copies both ways until either side
// ends; then it closes both, as a balancer does, so that the client sees
// a replica's death as a closed connection.
func (b *balancer) proxy(c net.Conn) {
	defer c.Close()
	b.mu.Lock()
	first := b.next
	b.next = (b.next + 1) % len(b.backends)
	b.mu.Unlock()
	var (
		up  net.Conn
		to  int
		err error
	)
	for i := range b.backends {
		to = (first + i) % len(b.backends)
		if up, err = net.DialTimeout("tcp", b.backends[to], time.Second); err == nil {
			break
		}
	}
	if err != nil {
		return
	}
	defer up.Close()
	if !b.track(to, c, up) {
		return
	}
	defer b.untrack(c, up)
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); copied <- struct{}{} }()
	<-copied
}

func (b *balancer) track(backend int, cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return false
	}
	b.served[backend]++
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

// connections returns how many connections each backend took.
func (b *balancer) connections() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.served...)
}

// close stops accepting, ends every connection and waits for its
// goroutines.
func (b *balancer) close() {
	b.mu.Lock()
	b.done = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.ln.Close()
	b.wg.Wait()
}
