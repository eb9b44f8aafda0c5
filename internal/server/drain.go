package server

import (
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// ShuttingDown reports whether the drain has begun ([Server.BeginShutdown] or [Server.Shutdown]):
// /healthz then answers 503 and new creates (POST /v1/responses, WebSocket upgrades) get 503
// server_shutting_down. It takes no lock.
func (s *Server) ShuttingDown() bool { return s.down.Load() }

// EndGrace ends the shutdown grace at once (a second SIGINT/SIGTERM): every in-flight response
// ends now with reason server_shutdown, each still with its terminal event, and Shutdown
// returns when they have been written. Connections and requests that arrive later are drained
// without grace too.
func (s *Server) EndGrace() {
	s.mu.Lock()
	s.graceEnded = true
	conns := make([]*session.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.EndGrace()
	}
}

// graceOver tells c that the grace has already ended, if it has (for connections tracked after
// EndGrace).
func (s *Server) graceOver(c *session.Conn) {
	if s.graceEnded {
		c.EndGrace()
	}
}

// healthz answers GET /healthz: 200 {"status":"ok"}, or 503 {"status":"shutting_down"} once
// the drain has begun, so that a load balancer stops sending new work during the drain.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.ShuttingDown() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"shutting_down"}` + "\n"))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// refuseDuringShutdown answers 503 shutting_down and reports true once the drain has
// begun: a POST that reaches the server during the drain (on a kept-alive connection) is
// not started.
func (s *Server) refuseDuringShutdown(w http.ResponseWriter) bool {
	if !s.ShuttingDown() {
		return false
	}
	w.Header().Set("Connection", "close")
	writeHTTPError(w, shuttingDownError())
	return true
}

func shuttingDownError() *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
		Code: protocol.CodeShuttingDown, Message: "The server is shutting down."}
}
