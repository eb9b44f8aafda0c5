package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session"
)

// AppendBeta is the OpenAI-Beta value that opts a WebSocket into the append shape
// (architecture §4); AppendQuery is the equivalent query parameter value of "protocol".
const (
	AppendBeta  = "responses_append=v1"
	AppendQuery = "append.v1"
)

// Options configures the server. The zero value works; each default is given.
type Options struct {
	// Model serves every request. Nil means the sim model at the "instant" preset.
	Model sampler.Model
	// MaxFrame is the largest client frame / POST body in bytes. 0 means 32 MiB.
	MaxFrame int64
	// MaxConnectionAge is the WebSocket age limit. 0 means no limit (the command's default is 60m).
	MaxConnectionAge time.Duration
	// SuspendTimeout, QueueDepth, CacheResponses, CacheBytes, ShutdownGrace: see session.Options.
	SuspendTimeout time.Duration
	QueueDepth     int
	CacheResponses int
	CacheBytes     int64
	ShutdownGrace  time.Duration
	// Logger receives the server's logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Server is Tether's HTTP handler: GET /healthz and /v1/responses (WebSocket upgrade with the
// append opt-in → the append shape of package session). Shutdown drains every WebSocket.
type Server struct {
	// Immutable
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	mu       sync.Mutex // guards conns and shutdown
	conns    map[*session.Conn]struct{}
	shutdown bool
	wg       sync.WaitGroup // one per WebSocket connection being served, and per drain
}

// New returns a Server with opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Model == nil {
		opts.Model = sampler.NewSim(sampler.SimOptions{Speed: sampler.SpeedInstant})
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = session.DefaultMaxFrame
	}
	s := &Server{opts: opts, log: opts.Logger, conns: make(map[*session.Conn]struct{})}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("/v1/responses", s.responses)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && isUpgrade(r) {
		s.websocket(w, r)
		return
	}
	writeHTTPError(w, protocol.Errorf(http.StatusNotImplemented, "not_implemented", "",
		"Only the append shape over WebSocket is served yet: open a WebSocket on this path with 'OpenAI-Beta: %s'.", AppendBeta))
}

func isUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// WantsAppend reports whether an upgrade request opts into the append shape: an OpenAI-Beta
// header (a comma-separated list, possibly repeated) containing responses_append=v1, or the
// query protocol=append.v1 (architecture §4).
func WantsAppend(r *http.Request) bool {
	if r.URL.Query().Get("protocol") == AppendQuery {
		return true
	}
	return headerHasToken(r.Header, "OpenAI-Beta", AppendBeta)
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	if !WantsAppend(r) {
		writeHTTPError(w, protocol.Errorf(http.StatusNotImplemented, "not_implemented", "",
			"The public WebSocket shape is not served yet: add 'OpenAI-Beta: %s' to use the append shape.", AppendBeta))
		return
	}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		writeHTTPError(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
			Code: session.CodeShuttingDown, Message: "The server is shutting down."})
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	w.Header().Set("OpenAI-Beta", AppendBeta)
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Info("websocket accept failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c := session.NewConn(session.NewWebSocketTransport(ws, s.opts.MaxFrame), s.sessionOptions())
	if !s.track(c) {
		c.Drain(protocol.ReasonServerShutdown)
	}
	defer s.untrack(c)
	s.log.Info("connection opened", "shape", "append", "remote", r.RemoteAddr)
	err = session.ServeAppend(c)
	_ = ws.CloseNow()
	s.log.Info("connection closed", "shape", "append", "remote", r.RemoteAddr, "reason", errString(err))
}

func errString(err error) string {
	if err == nil {
		return "drained"
	}
	return err.Error()
}

func (s *Server) sessionOptions() session.Options {
	o := s.opts
	return session.Options{
		Model:          o.Model,
		SuspendTimeout: o.SuspendTimeout,
		QueueDepth:     o.QueueDepth,
		CacheResponses: o.CacheResponses,
		CacheBytes:     o.CacheBytes,
		MaxAge:         o.MaxConnectionAge,
		ShutdownGrace:  o.ShutdownGrace,
		MaxFrame:       o.MaxFrame,
		Logger:         s.log,
	}
}

func (s *Server) track(c *session.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
	return !s.shutdown
}

func (s *Server) untrack(c *session.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// Shutdown drains every WebSocket connection (architecture §4: sampling rollouts may finish
// within the shutdown grace, suspended ones end at once with reason server_shutdown; then close
// 1001) and waits for them, or for ctx. New upgrades are refused with 503. http.Server.Shutdown
// does not wait for hijacked connections: call this alongside it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*session.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.Drain(protocol.ReasonServerShutdown)
		}()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func writeHTTPError(w http.ResponseWriter, e *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(protocol.AppendHTTPError(nil, e))
}
