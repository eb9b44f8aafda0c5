package server

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tetherd/tether/session"
)

// The shapes a ConnSnapshot reports.
const (
	ShapeAppend = "append" // an append-shape WebSocket
	ShapePublic = "public" // a public-shape WebSocket
	ShapeHTTP   = "http"   // the connection core of one POST /v1/responses
)

// connMeta is what the server knows of a tracked connection besides its core.
type connMeta struct {
	shape  string // ShapeAppend, ShapePublic or ShapeHTTP
	remote string // the client's address (WebSocket connections only)
}

// ConnSnapshot is a read-only view of one connection the server serves: a WebSocket, or the
// connection core of a POST /v1/responses in progress.
type ConnSnapshot struct {
	// Shape is ShapeAppend, ShapePublic or ShapeHTTP.
	Shape string
	// Remote is the client's address ("host:port"); empty for ShapeHTTP.
	Remote string
	session.ConnSnapshot
}

// Snapshot returns every connection the server serves now, oldest first, each with its live
// rollouts (tether serve -ui's live view). It holds the server's lock only to list them.
func (s *Server) Snapshot() []ConnSnapshot {
	s.mu.Lock()
	conns := make(map[*session.Conn]connMeta, len(s.conns))
	for c, m := range s.conns {
		conns[c] = m
	}
	s.mu.Unlock()
	out := make([]ConnSnapshot, 0, len(conns))
	for c, m := range conns {
		out = append(out, ConnSnapshot{Shape: m.shape, Remote: m.remote, ConnSnapshot: c.Snapshot()})
	}
	slices.SortFunc(out, func(a, b ConnSnapshot) int {
		return cmp.Or(a.Opened.Compare(b.Opened), strings.Compare(a.ID, b.ID))
	})
	return out
}
