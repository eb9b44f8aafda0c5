package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/compat"
	"github.com/tetherd/tether/compat/chatapi"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
	"github.com/tetherd/tether/session/wstransport"
)

// AppendBeta is the OpenAI-Beta value that opts a WebSocket into the append shape;
// AppendQuery is the equivalent query parameter value of "protocol".
const (
	AppendBeta  = "responses_append=v1"
	AppendQuery = "append.v1"
)

// ReattachBeta is the OpenAI-Beta token by which an append-shape client opts into
// reattachment (docs/append-protocol.md, Reattaching); ReattachQuery is the equivalent query
// parameter reattach=v1. The 101 answer carries the token back when the server parks rollouts
// to a shared store on shutdown.
const (
	ReattachBeta  = "responses_reattach=v1"
	ReattachQuery = "v1"
)

// Options configures the server. The zero value works; each default is given.
type Options struct {
	// Limits are the per-connection tunables the server passes to every connection core
	// unchanged (WebSocket and HTTP; see session.Limits for each one's unit and default).
	session.Limits
	// Model serves every request. Nil means the sim model at the "instant" preset with
	// tether serve's default context window (sim.DefaultContextWindow).
	Model sampler.Model
	// Store keeps store:true responses (-store). Nil means an in-memory store bounded by
	// StoreResponses and StoreBytes (0 means store.DefaultResponses and store.DefaultBytes).
	// The server does not close it.
	Store          store.Store
	StoreResponses int
	StoreBytes     int64
	// StoreTimeout bounds every store call (-store-timeout); a store that fails or does not
	// answer in time gets store_unavailable. 0 means store.DefaultTimeout (5s).
	StoreTimeout time.Duration
	// Keys are the accepted API keys; nil or empty means the server is open. A missing or wrong
	// key gets 401 on the upgrade and on every /v1 route (not on /healthz); see MetricsKeys for
	// /metrics.
	// Stored responses belong to the key that created them.
	Keys *Keys
	// MetricsKeys are the credentials that may read GET /metrics (-metrics-key-file), whose
	// gauges tell how much of the shared budget is left. Set, /metrics answers only a request
	// with "Authorization: Bearer <one of them>" on every listener: no key or a wrong one gets
	// 401 invalid_api_key, a valid API key of Keys 403 permission_denied. Nil: on the main
	// listener /metrics is served to everyone on an open server and refused with 403 to
	// every API key when Keys are set (a scraper then needs MetricsKeys or a listener of its
	// own, MetricsHandler).
	MetricsKeys *Keys
	// MetricsOwnListener tells that /metrics is served by MetricsHandler on a listener of its
	// own (-metrics-addr): the main listener then answers it only to MetricsKeys, 403 to anyone
	// else.
	MetricsOwnListener bool
	// Compaction signs and opens compaction items (POST /v1/responses/compact), on both
	// shapes; see session.Options.Compaction. Nil means a random per-process key: instances
	// that share clients (behind a load balancer) or restarts need one Compactor from the same
	// key file (-compaction-key-file).
	Compaction *session.Compactor
	// DisableWebSocket answers upgrades with 426, so that clients such as Codex fall back to
	// HTTP.
	DisableWebSocket bool
	// MaxConnections caps open WebSocket connections; over it an upgrade gets 503. 0 means no cap.
	MaxConnections int
	// BackgroundEventBytes and BackgroundKeep bound the events kept per background response
	// (bytes, counted in the memory budget) and how long they stay after it ended; see
	// compat.Background. 0 means 4 MiB and 10 minutes.
	BackgroundEventBytes int64
	BackgroundKeep       time.Duration
	// MaxSampling bounds the sampling steps running at once across all connections (a
	// server-wide admission gate composed with each connection's FIFO; waiting shows in
	// /metrics as tether_sampling_waiting). 0 means no bound.
	MaxSampling int
	// Slots is the number of llama.cpp-compatible slots of POST /v1/chat/completions (each
	// keeps one ModelSession open for KV reuse; see package chatapi). 0 means 4.
	Slots int
	// Models is the list of GET /v1/models (OpenAI's list shape). Nil means the backend's
	// own list (sampler.Lister), else SimModels.
	Models []ModelInfo
	// Pprof serves net/http/pprof under /debug/pprof/ (behind Keys when set). Off by default.
	Pprof bool
	// Logger receives the server's logs, including one access line per HTTP request and per
	// WebSocket connection. Nil means slog.Default().
	Logger *slog.Logger

	// HTTP connection limits (they apply to the http.Server of HTTPServer):
	// ReadTimeout bounds the reading of a POST body (408 request_timeout, connection closed)
	// and of one WebSocket message from its first frame's header to its last byte (the
	// connection is closed and the partial message's budget released; an idle socket between
	// messages is not bounded by it); 0 means DefaultReadTimeout, negative none. IdleTimeout closes a keep-alive connection
	// idle between requests; 0 means DefaultIdleTimeout, negative none. MaxHTTPConnections
	// bounds accepted TCP connections (WebSockets included): at the bound the longest-idle
	// keep-alive connection is closed, then up to HealthzReserve more serve only /healthz (503
	// too_many_connections to everything else), then new connections are closed at once;
	// 0 means DefaultMaxHTTPConnections, negative none.
	ReadTimeout        time.Duration
	IdleTimeout        time.Duration
	MaxHTTPConnections int
	// MaxMemory bounds the bytes of client frames and POST bodies being read and decoded
	// across the whole server (session.Budget, DecodeFactor bytes per received byte); over it a
	// POST gets 503 server_overloaded and a frame an error frame with that code, at once.
	// 0 means DefaultMaxMemory(), negative none. MaxDecoding bounds POST bodies being read and
	// decoded at once (503 server_overloaded over it); 0 means DefaultMaxDecoding, negative none.
	MaxMemory   int64
	MaxDecoding int

	// Per-key quotas (per API key; per client IP address when no keys are configured):
	// KeyRollouts bounds live rollouts (queued, sampling or suspended) and KeyConnections open
	// WebSocket connections, both answered quota_exceeded (429); 0 means the Default… value,
	// negative no quota. KeyStoredResponses and KeyStoredBytes bound what a key keeps in a
	// store that supports per-key quotas (store.KeyQuotas: the in-memory and the Redis store,
	// whether the server made it or it is Options.Store): over them the key's own least recently used
	// responses are evicted, never another key's. 0 means a quarter of the store's bound
	// (DefaultKeyStoredResponses and DefaultKeyStoredBytes of the default store), negative no
	// quota.
	KeyRollouts        int
	KeyConnections     int
	KeyStoredResponses int
	KeyStoredBytes     int64
	// KeyShare is the fraction of the shared capacity that one key may hold: MaxDecoding
	// slots and the MaxMemory bytes of frames and bodies being read and decoded (503
	// server_overloaded past it, though room is left; session.Budget.SetKeyShare), and the chat
	// completion Slots (a key past its share waits while a request of another key holds or
	// waits for a slot: chatapi.SlotOptions.KeyShare). 0 means session.DefaultKeyShare; a
	// negative value, or 1 and more, means no share.
	KeyShare float64
}

// Defaults of the HTTP connection limits and the memory budget (see Options).
const (
	DefaultReadTimeout        = 30 * time.Second
	DefaultIdleTimeout        = 60 * time.Second
	DefaultHeaderTimeout      = 10 * time.Second
	DefaultMaxHTTPConnections = 4096
	DefaultMaxDecoding        = 64
	DefaultKeyRollouts        = 1000
	DefaultKeyConnections     = 256
	DefaultKeyStoredResponses = store.DefaultResponses / KeyStoreShare
	DefaultKeyStoredBytes     = store.DefaultBytes / KeyStoreShare
)

// WebSocketCost is what an open WebSocket connection holds of the -max-memory budget
// (Options.MaxMemory) from its upgrade to its close, in bytes, besides its frames: its
// goroutines' stacks, its buffers and its session's state, about 56 KiB measured on an idle
// connection, rounded up. An upgrade that does not fit gets 503 server_overloaded.
const WebSocketCost = 64 << 10

// KeyStoreShare is what a key's default store quota is a fraction of: a key may keep
// 1/KeyStoreShare of the store's responses and bytes unless Options say otherwise.
const KeyStoreShare = 4

// orDefault returns n, def when n is 0, and 0 (none) when n is negative.
func orDefault[T int | int64](n, def T) T {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// Server is Tether's HTTP handler: GET /healthz, POST /v1/chat/completions and GET /slots
// (package chatapi), and /v1/responses (WebSocket upgrade with the
// append opt-in → the append shape of package session). Shutdown drains every WebSocket.
type Server struct {
	// Immutable
	opts     Options
	log      *slog.Logger
	mux      *http.ServeMux
	http     *compat.HTTP
	chat     *chatapi.Handler
	counters compat.Counters
	metrics  session.Metrics
	adm      *session.Admission
	// httpErrors counts HTTP error answers by code (tether_errors_total with the error frames)
	httpErrors codeCounts
	store      *store.Guarded // opts.Store under StoreTimeout, counting failures
	parker     store.Parker   // store, when it is shared and keeps parked rollouts; else nil
	budget     *session.Budget
	live       *session.LiveItems // the items of live append-shape rollouts, for item_reference
	keyRoll    *session.KeyLimit
	keyConns   *session.KeyLimit
	// metricsHTTP writes the Prometheus text of GET /metrics, to whoever metricsRoute lets in
	metricsHTTP http.Handler

	mu       sync.Mutex // guards conns, open, shutdown and graceEnded
	conns    map[*session.Conn]connMeta
	open     int // WebSocket connections being served (accepted or not yet)
	shutdown bool
	// down mirrors shutdown (set with it, under mu) for the readers that take no lock: GET
	// /healthz reads it, so that a probe never waits behind requests and upgrades that
	// register their connections under mu.
	down       atomic.Bool
	graceEnded bool           // EndGrace was called
	wg         sync.WaitGroup // one per WebSocket connection being served, and per drain
}

// New returns a Server with opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Model == nil {
		opts.Model = sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, ContextWindow: sim.DefaultContextWindow})
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = session.DefaultMaxFrame
	}
	if opts.Store == nil {
		opts.Store = store.NewMemory(opts.StoreResponses, opts.StoreBytes)
	}
	if q, ok := opts.Store.(store.KeyQuotas); ok {
		count, bytes := q.Bounds()
		q.SetKeyQuota(orDefault(opts.KeyStoredResponses, max(count/KeyStoreShare, 1)), orDefault(opts.KeyStoredBytes, max(bytes/KeyStoreShare, 1)))
	}
	s := &Server{opts: opts, log: opts.Logger, conns: make(map[*session.Conn]connMeta), adm: session.NewAdmission(opts.MaxSampling),
		store: store.Guard(opts.Store, opts.StoreTimeout, opts.Logger)}
	if _, inProcess := opts.Store.(*store.Memory); !inProcess {
		// A rollout parked in this process's own memory would not outlive it: only a store
		// shared by the deployment (Redis) takes parked rollouts.
		s.parker, _ = store.ParkerOf(s.store)
	}
	s.keyRoll = session.NewKeyLimit(orDefault(opts.KeyRollouts, DefaultKeyRollouts), "live rollouts")
	s.keyConns = session.NewKeyLimit(orDefault(opts.KeyConnections, DefaultKeyConnections), "WebSocket connections")
	s.budget = newBudget(opts.MaxMemory, opts.MaxDecoding)
	s.live = session.NewLiveItems(s.budget) // its entries count in the budget
	s.budget.SetKeyShare(keyShare(opts.KeyShare))
	httpSession := s.sessionOptions("", "")
	httpSession.MaxConnectionAge = 0 // one request per connection core
	httpSession.PingInterval = 0
	httpSession.WriteTimeout = -1 // an HTTP request writes through its own ResponseWriter
	writeTimeout := opts.WriteTimeout
	if writeTimeout == 0 {
		writeTimeout = session.DefaultWriteTimeout
	}
	s.http = &compat.HTTP{Session: httpSession, Options: s.publicOptions(), MaxBody: opts.MaxFrame,
		WriteTimeout: max(writeTimeout, 0), Track: s.trackHTTP,
		ReadTimeout: positive(opts.ReadTimeout, DefaultReadTimeout), Budget: s.budget,
		Background: &compat.Background{MaxEventBytes: opts.BackgroundEventBytes, Keep: opts.BackgroundKeep}}
	if _, inProcess := opts.Store.(*store.Memory); !inProcess {
		// On a store the deployment shares, a background response is seen from every instance.
		s.http.Background.Shared, _ = store.BackgroundOf(s.store)
	}
	if opts.Slots <= 0 {
		opts.Slots = 4
	}
	idle := opts.SuspendTimeout // a slot's session is freed like a suspended rollout
	if idle == 0 {
		idle = session.DefaultSuspendTimeout
	}
	s.chat = &chatapi.Handler{MaxBody: opts.MaxFrame, ReadBody: s.http.ReadBody, Admission: s.adm, Logger: opts.Logger,
		Slots: chatapi.NewSlots(opts.Model, chatapi.SlotOptions{N: opts.Slots, MaxBytes: opts.MaxRolloutBytes, Idle: idle,
			KeyShare: keyShare(opts.KeyShare), Budget: s.budget, Logger: opts.Logger})}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, protocol.Errorf(http.StatusNotFound, "not_found", "", "No route %s %s on this server.", r.Method, r.URL.Path))
	})
	s.metricsHTTP = s.metricsHandler()
	s.mux.HandleFunc("GET /metrics", s.metricsRoute)
	s.mux.HandleFunc("/v1/responses", s.auth(s.responses))
	s.mux.HandleFunc("/v1/chat/completions", s.auth(func(w http.ResponseWriter, r *http.Request, owner string) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			s.fail(w, protocol.Errorf(http.StatusMethodNotAllowed, protocol.CodeMethodNotAllowed, "",
				"%s /v1/chat/completions is not supported: POST a Chat Completions request.", r.Method))
			return
		}
		s.chatCompletion(w, r, owner)
	}))
	s.mux.HandleFunc("GET /slots", s.auth(func(w http.ResponseWriter, r *http.Request, _ string) { s.chat.ServeSlots(w, r) }))
	s.mux.HandleFunc("POST /v1/responses/compact", s.auth(s.http.Compact))
	s.mux.HandleFunc("GET /v1/responses/{id}", s.auth(func(w http.ResponseWriter, r *http.Request, owner string) {
		s.http.Get(w, r, r.PathValue("id"), owner)
	}))
	s.mux.HandleFunc("POST /v1/responses/{id}/cancel", s.auth(func(w http.ResponseWriter, r *http.Request, owner string) {
		s.http.Cancel(w, r, r.PathValue("id"), owner)
	}))
	s.mux.HandleFunc("DELETE /v1/responses/{id}", s.auth(func(w http.ResponseWriter, r *http.Request, owner string) {
		s.http.Delete(w, r, r.PathValue("id"), owner)
	}))
	s.routeOps()
	s.mux.HandleFunc("GET /v1/responses/{id}/input_items", s.auth(func(w http.ResponseWriter, r *http.Request, owner string) {
		s.http.InputItems(w, r, r.PathValue("id"), owner)
	}))
	return s
}

// auth wraps a handler with the API key check; the handler gets the request's owner.
func (s *Server) auth(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		owner, ok := s.opts.Keys.owner(r)
		if !ok {
			unauthorized(w, r)
			return
		}
		// The key's share of the shared capacity (decoding, chat slots) is counted by it.
		h(w, r.WithContext(session.WithShareKey(r.Context(), session.QuotaKey(owner, r.RemoteAddr))), owner)
	}
}

// RequireKey wraps h with the API key check of the /v1 routes: with Options.Keys set, a
// request without a valid "Authorization: Bearer" key gets the same 401 error body as /v1.
// tether serve -ui protects its API with it.
func (s *Server) RequireKey(h http.Handler) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, _ string) { h.ServeHTTP(w, r) })
}

// keyShare is Options.KeyShare with its default: 0 for no share.
func keyShare(v float64) float64 {
	switch {
	case v == 0:
		return session.DefaultKeyShare
	case v < 0:
		return 0
	}
	return v
}

// Metrics returns the counters of the server's connections.
func (s *Server) Metrics() *session.Metrics { return &s.metrics }

// Background returns the server's background responses (background:true over HTTP).
func (s *Server) Background() *compat.Background { return s.http.Background }

// Counters reports how public-shape continuations ran (hot path, cold path, new chains,
// warm-ups) since the server started.
func (s *Server) Counters() *compat.Counters { return &s.counters }

func (s *Server) publicOptions() compat.Options {
	return compat.Options{Store: s.store, Counters: &s.counters}
}

// ServeHTTP implements http.Handler: the access log and the key check (serveLogged), then
// the connection and deadline guards (guard), then the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serveLogged(w, r) }

func (s *Server) responses(w http.ResponseWriter, r *http.Request, owner string) {
	switch {
	case r.Method == http.MethodGet && isUpgrade(r):
		s.websocket(w, r, owner)
	case r.Method == http.MethodPost:
		if s.refuseDuringShutdown(w) {
			return
		}
		s.http.Create(w, r, owner)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.fail(w, protocol.Errorf(http.StatusMethodNotAllowed, protocol.CodeMethodNotAllowed, "",
			"%s /v1/responses is not supported: POST a create body, or GET with a WebSocket upgrade.", r.Method))
	}
}

func isUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// Versions of the append-shape opt-in this server serves, as named in errors.
const appendVersions = "'OpenAI-Beta: " + AppendBeta + "' or the query 'protocol=" + AppendQuery + "'"

// WantsAppend reports whether an upgrade request opts into the append shape: an OpenAI-Beta
// header (a comma-separated list, possibly repeated) containing responses_append=v1, or the
// query protocol=append.v1. A request that names a version this server does
// not serve — an OpenAI-Beta token responses_append=<other> (or without a version), or a
// protocol query other than append.v1 — gets a 400 invalid_value error naming the versions
// served, so that a client asking for a newer protocol never silently gets the public shape.
func WantsAppend(r *http.Request) (bool, *protocol.Error) {
	want := false
	if vs, ok := r.URL.Query()["protocol"]; ok {
		for _, v := range vs {
			if v != AppendQuery {
				return false, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "protocol",
					"Unsupported protocol '%s': this server serves the append shape as %s.", clipValue(v), appendVersions)
			}
		}
		want = true
	}
	key, _, _ := strings.Cut(AppendBeta, "=")
	for _, v := range r.Header.Values("OpenAI-Beta") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			k, _, _ := strings.Cut(t, "=")
			if !strings.EqualFold(strings.TrimSpace(k), key) {
				continue // another beta feature (responses_websockets=…)
			}
			if !strings.EqualFold(t, AppendBeta) {
				return false, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "",
					"Unsupported OpenAI-Beta '%s': this server serves the append shape as %s.", clipValue(t), appendVersions)
			}
			want = true
		}
	}
	return want, nil
}

// WantsReattach reports whether an append-shape upgrade request opts into reattachment: an
// OpenAI-Beta token responses_reattach=v1 (compared as WantsAppend compares), or the query
// reattach=v1. Another version is not an error: the 101 then lacks the token.
func WantsReattach(r *http.Request) bool {
	if r.URL.Query().Get("reattach") == ReattachQuery {
		return true
	}
	for _, v := range r.Header.Values("OpenAI-Beta") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), ReattachBeta) {
				return true
			}
		}
	}
	return false
}

// clipValue shortens a header or query value quoted in an error message.
func clipValue(v string) string { return protocol.Clip(v, 64) }

// checkHandshake checks what websocket.Accept checks of an upgrade request beyond isUpgrade
// (RFC 6455 section 4.2.1: HTTP/1.1, Sec-WebSocket-Version 13, one Sec-WebSocket-Key of 16 base64
// bytes), so that a bad handshake gets the JSON error envelope rather than the library's plain
// text. A wrong version is answered with Sec-WebSocket-Version: 13 (RFC 6455 section 4.4).
func checkHandshake(w http.ResponseWriter, r *http.Request) *protocol.Error {
	bad := func(format string, args ...any) *protocol.Error {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidHandshake, "", format, args...)
	}
	if !r.ProtoAtLeast(1, 1) {
		return bad("A WebSocket upgrade needs HTTP/1.1 or later, not %s.", r.Proto)
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		if v == "" {
			return bad("The WebSocket upgrade has no Sec-WebSocket-Version header: this server speaks version 13 (RFC 6455).")
		}
		return bad("Unsupported Sec-WebSocket-Version '%s': this server speaks version 13 (RFC 6455).", clipValue(v))
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return bad("A WebSocket upgrade needs exactly one Sec-WebSocket-Key header, not %d.", len(keys))
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); err != nil || len(k) != 16 {
		return bad("The Sec-WebSocket-Key header must be 16 bytes in base64 (RFC 6455).")
	}
	return nil
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

func (s *Server) websocket(w http.ResponseWriter, r *http.Request, owner string) {
	if s.opts.DisableWebSocket {
		s.fail(w, &protocol.Error{Status: http.StatusUpgradeRequired, Type: protocol.TypeInvalidRequest,
			Code: protocol.CodeWebSocketDisabled, Message: "WebSocket mode is disabled on this server: use POST /v1/responses."})
		return
	}
	if e := checkHandshake(w, r); e != nil {
		s.fail(w, e)
		return
	}
	appendShape, e := WantsAppend(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		writeHTTPError(w, shuttingDownError())
		return
	}
	if max := s.opts.MaxConnections; max > 0 && s.open >= max {
		s.mu.Unlock()
		s.fail(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
			Code: protocol.CodeTooManyConnections, Message: fmt.Sprintf("The server holds its maximum of %d WebSocket connections: try again later.", max)})
		return
	}
	quota := session.QuotaKey(owner, r.RemoteAddr)
	if err := s.keyConns.Acquire(quota); err != nil {
		s.mu.Unlock()
		s.fail(w, protocol.ErrorOf(err))
		return
	}
	if !s.budget.TryReserve(WebSocketCost) {
		s.keyConns.Release(quota)
		s.mu.Unlock()
		s.fail(w, session.OverloadedError(fmt.Sprintf("the memory budget has no room for another WebSocket connection's %d KiB", WebSocketCost>>10)))
		return
	}
	s.open++
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.budget.Release(WebSocketCost)
		s.keyConns.Release(quota)
		s.mu.Lock()
		s.open--
		s.mu.Unlock()
		s.wg.Done()
	}()

	reattach := appendShape && s.parker != nil && WantsReattach(r)
	if appendShape {
		w.Header().Set("OpenAI-Beta", AppendBeta)
		if reattach {
			w.Header().Add("OpenAI-Beta", ReattachBeta)
		}
	}
	ws, err := wstransport.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.log.Info("websocket accept failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	sess := s.sessionOptions(owner, quota)
	sess.Reattach = reattach
	c := session.NewConn(ws.Transport(s.opts.MaxFrame, s.budget, positive(s.opts.ReadTimeout, DefaultReadTimeout), quota), sess)
	shape, gauge := ShapePublic, &s.metrics.PublicConns
	if appendShape {
		shape, gauge = ShapeAppend, &s.metrics.AppendConns
	}
	if !s.track(c, connMeta{shape: shape, remote: r.RemoteAddr}) {
		c.Drain(protocol.ReasonServerShutdown)
	}
	defer s.untrack(c)
	gauge.Add(1)
	defer gauge.Add(-1)
	s.log.Info("connection opened", "shape", shape, "remote", r.RemoteAddr)
	if appendShape {
		err = session.ServeAppend(c)
	} else {
		err = compat.ServeWebSocket(c, s.publicOptions())
	}
	_ = ws.Conn.CloseNow()
	reason := closeReason(err)
	if why := c.DropReason(); why != "" {
		reason = "dropped: " + why
	}
	s.log.Info("connection closed", "shape", shape, "remote", r.RemoteAddr, "reason", reason)
}

// chatCompletion serves POST /v1/chat/completions: a request is a live rollout of its key
// while it runs (KeyRollouts: quota_exceeded, 429), reads its body under the memory budget, the
// decoding bound and the read timeout, and samples under -max-sampling (chatapi.Handler).
func (s *Server) chatCompletion(w http.ResponseWriter, r *http.Request, owner string) {
	quota := session.QuotaKey(owner, r.RemoteAddr)
	if err := s.keyRoll.Acquire(quota); err != nil {
		s.fail(w, protocol.ErrorOf(err))
		return
	}
	defer s.keyRoll.Release(quota)
	s.chat.ServeHTTP(w, r)
}

// closeReason describes why a connection's read loop ended, for the log.
func closeReason(err error) string {
	switch {
	case err == nil:
		return "drained"
	case websocket.CloseStatus(err) != -1:
		return "client closed (" + websocket.CloseStatus(err).String() + ")"
	}
	return err.Error()
}

func (s *Server) sessionOptions(owner, quota string) session.Options {
	o := s.opts
	return session.Options{
		Limits:      o.Limits,
		Model:       o.Model,
		Compaction:  o.Compaction,
		Logger:      s.log,
		Metrics:     &s.metrics,
		Admission:   s.adm,
		Store:       s.store,
		Parker:      s.parker,
		Budget:      s.budget,
		LiveItems:   s.live,
		KeyRollouts: s.keyRoll,
		Owner:       owner,
		QuotaKey:    quota,
		InProgress:  s.backgroundInProgress,
	}
}

// backgroundInProgress is the session.Options.InProgress of every connection: a continuation
// naming a background response that has not ended is response_in_progress (409) on every
// shape, as over HTTP.
func (s *Server) backgroundInProgress(ctx context.Context, id, owner string) bool {
	return s.http.Background.InProgress(ctx, id, owner)
}

func (s *Server) track(c *session.Conn, m connMeta) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = m
	s.graceOver(c)
	return !s.shutdown
}

// trackHTTP registers the connection core of an HTTP request, so that Shutdown drains it too.
func (s *Server) trackHTTP(c *session.Conn) func() {
	s.mu.Lock()
	s.conns[c] = connMeta{shape: ShapeHTTP}
	s.graceOver(c)
	s.wg.Add(1)
	s.mu.Unlock()
	return func() {
		s.untrack(c)
		s.wg.Done()
	}
}

func (s *Server) untrack(c *session.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// BeginShutdown marks the server draining and starts draining every connection, then returns
// without waiting: from its return /healthz answers 503 and new creates (POST /v1/responses,
// WebSocket upgrades) get 503 server_shutting_down. Sampling rollouts may finish within the
// shutdown grace, suspended ones end at once with reason server_shutdown, then each WebSocket
// closes 1001. Calling it again does nothing; [Server.Shutdown] calls it.
func (s *Server) BeginShutdown() {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return
	}
	s.shutdown = true
	s.down.Store(true)
	s.chat.Slots.Close()
	conns := make([]*session.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	// Under mu, so that a Shutdown that finds the server already draining waits for these.
	s.wg.Add(len(conns))
	s.mu.Unlock()
	for _, c := range conns {
		go func() {
			defer s.wg.Done()
			c.Drain(protocol.ReasonServerShutdown)
		}()
	}
}

// Shutdown calls [Server.BeginShutdown] and waits until every WebSocket and HTTP response has
// drained, or for ctx (then it returns ctx.Err()). http.Server.Shutdown does not wait for
// hijacked connections: call this alongside it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.BeginShutdown()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.http.Background.Close() // every background response has drained with its core
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail writes e (the access log counts it in tether_errors_total).
func (s *Server) fail(w http.ResponseWriter, e *protocol.Error) {
	writeHTTPError(w, e)
}

func writeHTTPError(w http.ResponseWriter, e *protocol.Error) { protocol.WriteHTTPError(w, e) }
