package server

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
)

// HealthzReserve is how many connections the HTTP connection bound accepts beyond
// Options.MaxHTTPConnections so that GET /healthz keeps answering at the bound: such a
// connection serves /healthz only (every other request gets 503 too_many_connections), and
// it is closed after one response.
const HealthzReserve = 16

// limitListener bounds the accepted connections (Options.MaxHTTPConnections). At the bound it
// first closes the connection that has been idle (between keep-alive requests) the longest;
// when none is idle, up to HealthzReserve more are accepted as overflow connections, and
// beyond that a new connection is closed at once.
type limitListener struct {
	net.Listener
	max int

	mu   sync.Mutex // guards open and idle
	open int
	idle *list.List // of *limitConn, oldest idle at the front
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: max, idle: list.New()}
}

// Accept returns the next connection within the bound.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		_ = c.Close()
	}
}

// admit counts c in, evicting an idle connection at the bound; nil means c must be closed.
func (l *limitListener) admit(c net.Conn) *limitConn {
	l.mu.Lock()
	var evict *limitConn
	if l.open >= l.max && l.idle.Len() > 0 {
		evict = l.idle.Remove(l.idle.Front()).(*limitConn)
		evict.el = nil
	}
	if evict == nil && l.open >= l.max+HealthzReserve {
		l.mu.Unlock()
		return nil
	}
	lc := &limitConn{Conn: c, l: l, overflow: evict == nil && l.open >= l.max}
	l.open++
	l.mu.Unlock()
	if evict != nil {
		_ = evict.Close() // counted out by its Close
	}
	return lc
}

// connState is the http.Server's ConnState hook: it tracks which connections are idle.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.el != nil {
		l.idle.Remove(lc.el)
		lc.el = nil
	}
	if st == http.StateIdle && !lc.closed {
		lc.el = l.idle.PushBack(lc)
	}
}

// limitConn is one accepted connection; Close counts it out once.
type limitConn struct {
	net.Conn
	l        *limitListener
	overflow bool // accepted in the healthz reserve

	// Guarded by l.mu
	el     *list.Element // in l.idle while idle
	closed bool
}

func (c *limitConn) Close() error {
	c.l.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.open--
		if c.el != nil {
			c.l.idle.Remove(c.el)
			c.el = nil
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

type connKey struct{}

// overflowConn reports whether the request arrived on a connection of the healthz reserve.
func overflowConn(r *http.Request) bool {
	c, _ := r.Context().Value(connKey{}).(*limitConn)
	return c != nil && c.overflow
}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}
