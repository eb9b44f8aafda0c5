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
// first closes the connection that has been idle the longest: idle between keep-alive
// requests, or still sending a request's headers (a client that trickles headers holds no
// handler, so it is as evictable as a silent one, and cannot fill the bound or the reserve);
// when none is idle, up to HealthzReserve more are accepted as overflow connections, and
// beyond that a new connection is closed at once. A connection whose request is being
// served (its handler runs) is never closed.
type limitListener struct {
	net.Listener
	max int

	mu   sync.Mutex // guards open and idle
	open int
	idle *list.List // of *limitConn not being served, the longest idle at the front
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

// connState is the http.Server's ConnState hook: it tracks which connections are idle. A new
// connection and one that went idle after a response are idle until their request's handler
// starts (serving); StateActive (the first bytes of a request have come) changes nothing,
// because a request whose headers are still coming holds nothing.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok || st == http.StateActive {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.el != nil {
		l.idle.Remove(lc.el)
		lc.el = nil
	}
	if (st == http.StateNew || st == http.StateIdle) && !lc.closed {
		lc.el = l.idle.PushBack(lc)
	}
}

// serving marks c busy: its request's headers are read and its handler runs.
func (c *limitConn) serving() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.el != nil {
		c.l.idle.Remove(c.el)
		c.el = nil
	}
}

// limitConn is one accepted connection; Close counts it out once.
type limitConn struct {
	net.Conn
	l        *limitListener
	overflow bool // accepted in the healthz reserve

	// Guarded by l.mu
	el     *list.Element // in l.idle while idle or sending a request's headers
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

// serveConn marks the connection of r as being served (no longer evictable) and reports
// whether it is a connection of the healthz reserve.
func serveConn(r *http.Request) (overflow bool) {
	c, _ := r.Context().Value(connKey{}).(*limitConn)
	if c == nil {
		return false
	}
	c.serving()
	return c.overflow
}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}
