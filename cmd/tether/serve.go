package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tetherd/tether/backend/responses"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/store"
)

type serveConfig struct {
	addr           string
	speed          string
	maxFrame       byteSize
	maxAge         time.Duration
	suspendTimeout time.Duration
	shutdownGrace  time.Duration
	queueDepth     int
	cacheResponses int
	cacheBytes     byteSize
	storeResponses int
	storeBytes     byteSize
	storeURL       string
	storeTTL       time.Duration
	storeTimeout   time.Duration
	apiKeys        string
	websocket      bool
	maxConns       int
	pingInterval   time.Duration
	writeTimeout   time.Duration
	maxSuspended   int
	maxSuspTotal   int64
	maxRollout     byteSize
	logLevel       string
	logFormat      string
	pprof          bool
	maxSampling    int
	keepAlive      time.Duration
	backend        string
	upstream       string
	upstreamKey    string
	upstreamTO     time.Duration
}

func serveFlags(fs *flag.FlagSet) *serveConfig {
	c := &serveConfig{maxFrame: 32 << 20, cacheBytes: 64 << 20, storeBytes: 256 << 20, maxRollout: 64 << 20}
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8787", "listen address")
	fs.StringVar(&c.speed, "model-speed", "1000", "sim preset: instant, 65, 1000 or 4000 (tokens/s)")
	fs.Var(&c.maxFrame, "max-frame", "largest client frame / POST body (e.g. 32MiB)")
	fs.DurationVar(&c.maxAge, "max-connection-age", 60*time.Minute, "WebSocket connection age limit (0 = none)")
	fs.DurationVar(&c.suspendTimeout, "suspend-timeout", 10*time.Minute, "how long a suspended rollout waits for input")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 30*time.Second, "how long in-flight responses may finish on shutdown")
	fs.IntVar(&c.queueDepth, "queue-depth", 16, "queued creates/appends per connection")
	fs.IntVar(&c.cacheResponses, "cache-responses", 128, "per-connection registry bound (responses)")
	fs.Var(&c.cacheBytes, "cache-bytes", "per-connection registry bound (bytes)")
	fs.IntVar(&c.storeResponses, "store-responses", 10000, "store bound (responses, least recently used evicted first)")
	fs.Var(&c.storeBytes, "store-bytes", "store bound (bytes)")
	fs.StringVar(&c.storeURL, "store", "memory", "where store:true responses live: memory, or redis://host:port/db (shared by several instances)")
	fs.DurationVar(&c.storeTTL, "store-ttl", store.DefaultTTL, "Redis store: a stored response expires this long after its last use")
	fs.DurationVar(&c.storeTimeout, "store-timeout", store.DefaultTimeout, "bound on every store call; a store that fails or is slower gets store_unavailable")
	fs.StringVar(&c.apiKeys, "api-keys", "", "file of accepted API keys, one per line (none = open server)")
	fs.BoolVar(&c.websocket, "websocket", true, "serve WebSocket upgrades (false answers them 426, so clients fall back to HTTP)")
	fs.IntVar(&c.maxConns, "max-connections", 1024, "open WebSocket connections (over it: 503 on upgrade; 0 = no cap)")
	fs.DurationVar(&c.pingInterval, "ping-interval", 30*time.Second, "protocol ping interval; a peer that misses a pong is dropped (0 = no pings)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 30*time.Second, "a client that does not read one frame within this is dropped")
	fs.IntVar(&c.maxSuspended, "max-suspended", 64, "live rollouts per connection (over it: rollout_limit_reached; 0 = no cap)")
	fs.Int64Var(&c.maxSuspTotal, "max-suspended-total", 10000, "live rollouts in the whole server (0 = no cap)")
	fs.Var(&c.maxRollout, "max-rollout-bytes", "item bytes one rollout may hold (over it: rollout_too_large; 0 = no cap)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error (the access log is at info)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text (logfmt) or json")
	fs.BoolVar(&c.pprof, "pprof", false, "serve /debug/pprof/ (behind the API keys when -api-keys is set)")
	fs.IntVar(&c.maxSampling, "max-sampling", 0, "sampling steps running at once across all connections (0 = no bound)")
	fs.DurationVar(&c.keepAlive, "keepalive", 5*time.Second, "longest silence while a response samples before a keepalive response.in_progress is sent (negative = none)")
	fs.StringVar(&c.backend, "backend", "sim", "model backend: sim, chat (an OpenAI-compatible Chat Completions engine) or responses (an upstream Responses API over WebSocket)")
	fs.StringVar(&c.upstream, "upstream", "", "the upstream engine's URL (backends chat and responses)")
	fs.StringVar(&c.upstreamKey, "upstream-api-key-file", "", "file holding the API key sent to the upstream (backends chat and responses)")
	fs.DurationVar(&c.upstreamTO, "upstream-timeout", 5*time.Minute, "longest silence from the upstream within one sampling step before the step fails")
	return c
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "Run the server (the sim model).", stderr)
	cfg := serveFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	opts, err := serverOptions(cfg, log)
	if err != nil {
		return err
	}
	store.LogRedisTo(log)
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	opts.Store, opts.StoreTimeout = st, cfg.storeTimeout
	srv := server.New(opts)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if opts.Keys.Open() {
		log.Warn("no API keys configured: the server is open to anyone who can reach it (use -api-keys FILE)")
	}
	log.Info("tether listening", startupAttrs(cfg, ln.Addr().String())...)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return stop(ctx, cfg, log, srv, hs, ln, errc)
}

// newLogger returns the logger of -log-level and -log-format.
func newLogger(cfg *serveConfig, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return nil, fmt.Errorf("%w: -log-level: %v", errUsage, err)
	}
	ho := &slog.HandlerOptions{Level: level}
	switch cfg.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("%w: -log-format: want text or json, got %q", errUsage, cfg.logFormat)
}

// serverOptions turns the flags into server.Options.
func serverOptions(cfg *serveConfig, log *slog.Logger) (server.Options, error) {
	speed, err := sim.ParseSpeed(cfg.speed)
	if err != nil {
		return server.Options{}, fmt.Errorf("%w: -model-speed: %v", errUsage, err)
	}
	var keys *server.Keys
	if cfg.apiKeys != "" {
		if keys, err = server.LoadKeys(cfg.apiKeys); err != nil {
			return server.Options{}, err
		}
	}
	grace := cfg.shutdownGrace
	if grace <= 0 {
		grace = -1 // session: no grace
	}
	model, err := newModel(cfg, speed, log)
	if err != nil {
		return server.Options{}, err
	}
	return server.Options{
		Model:             model,
		MaxFrame:          int64(cfg.maxFrame),
		MaxConnectionAge:  cfg.maxAge,
		SuspendTimeout:    cfg.suspendTimeout,
		QueueDepth:        cfg.queueDepth,
		CacheResponses:    cfg.cacheResponses,
		CacheBytes:        int64(cfg.cacheBytes),
		ShutdownGrace:     grace,
		Keys:              keys,
		DisableWebSocket:  !cfg.websocket,
		MaxConnections:    cfg.maxConns,
		PingInterval:      cfg.pingInterval,
		WriteTimeout:      cfg.writeTimeout,
		MaxSuspended:      cfg.maxSuspended,
		MaxSuspendedTotal: cfg.maxSuspTotal,
		MaxRolloutBytes:   int64(cfg.maxRollout),
		Pprof:             cfg.pprof,
		MaxSampling:       cfg.maxSampling,
		KeepAlive:         cfg.keepAlive,
		Logger:            log,
	}, nil
}

// startupAttrs are the effective settings of the startup log line.
func startupAttrs(cfg *serveConfig, addr string) []any {
	shapes := "public (POST, SSE, WebSocket), append (WebSocket with OpenAI-Beta: " + server.AppendBeta + ")"
	if !cfg.websocket {
		shapes = "public (POST, SSE); WebSocket off (upgrades get 426)"
	}
	keys := "none (open server)"
	if cfg.apiKeys != "" {
		keys = "required (" + cfg.apiKeys + ")"
	}
	return []any{"addr", addr, "version", versionLine(), "backend", backendLine(cfg), "model_speed", cfg.speed,
		"shapes", shapes, "api_keys", keys,
		"store", storeLine(cfg),
		"log_level", cfg.logLevel, "log_format", cfg.logFormat, "pprof", cfg.pprof, "shutdown_grace", cfg.shutdownGrace}
}

// stop shuts the server down after the first signal: the listener closes at once (no new
// connections), /healthz answers 503 and new creates 503 shutting_down on kept-alive
// connections, in-flight responses finish within -shutdown-grace, and a second signal ends
// the grace at once (every response still gets its terminal event).
func stop(ctx context.Context, cfg *serveConfig, log *slog.Logger, srv *server.Server, hs *http.Server, ln net.Listener, errc <-chan error) error {
	_ = ln.Close() // before the log line, which tells that no new connection is accepted
	log.Info("shutting down: no new connections; in-flight responses may finish (a second signal ends them now)", "grace", cfg.shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), max(cfg.shutdownGrace, 0)+10*time.Second)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- srv.Shutdown(sctx) }()
	var werr error
	select {
	case werr = <-drained:
	case <-forced(ctx):
		log.Info("second signal: ending the grace now")
		srv.EndGrace()
		werr = <-drained
	}
	herr := hs.Shutdown(sctx)
	<-errc
	if err := errors.Join(werr, herr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// openStore opens the store of -store; Redis must answer within -store-timeout.
func openStore(ctx context.Context, cfg *serveConfig) (store.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, max(cfg.storeTimeout, time.Second))
	defer cancel()
	ttl := cfg.storeTTL
	if ttl <= 0 {
		ttl = -1 // no expiry
	}
	st, err := store.Open(ctx, cfg.storeURL, store.RedisOptions{MaxResponses: cfg.storeResponses, MaxBytes: int64(cfg.storeBytes), TTL: ttl})
	if err != nil {
		return nil, fmt.Errorf("-store: %w", err)
	}
	return st, nil
}

// newModel returns the backend that -backend names.
func newModel(cfg *serveConfig, speed sim.Speed, log *slog.Logger) (sampler.Model, error) {
	if cfg.backend != "sim" && cfg.upstream == "" {
		return nil, fmt.Errorf("-backend %s needs -upstream URL", cfg.backend)
	}
	switch cfg.backend {
	case "sim":
		return sim.NewSim(sim.SimOptions{Speed: speed, Realtime: true}), nil
	case "responses":
		key, err := upstreamKey(cfg)
		if err != nil {
			return nil, err
		}
		m, err := responses.New(responses.Options{URL: cfg.upstream, APIKey: key, Timeout: cfg.upstreamTO})
		if err != nil {
			return nil, fmt.Errorf("-upstream: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("-backend %q: want sim, chat or responses", cfg.backend)
}

// upstreamKey reads the upstream API key file of -upstream-api-key-file ("" when unset).
func upstreamKey(cfg *serveConfig) (string, error) {
	if cfg.upstreamKey == "" {
		return "", nil
	}
	b, err := os.ReadFile(cfg.upstreamKey)
	if err != nil {
		return "", fmt.Errorf("-upstream-api-key-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// backendLine names the backend for the startup line.
func backendLine(cfg *serveConfig) string {
	if cfg.backend == "sim" {
		return "sim"
	}
	return cfg.backend + " (" + cfg.upstream + ")"
}

// storeLine names the store for the startup line (a Redis URL without its password).
func storeLine(cfg *serveConfig) string {
	bounds := fmt.Sprintf("%d responses, %s", cfg.storeResponses, formatBytes(int64(cfg.storeBytes)))
	if cfg.storeURL == "" || cfg.storeURL == "memory" {
		return "memory (" + bounds + ")"
	}
	u, err := url.Parse(cfg.storeURL)
	if err != nil {
		return "redis (" + bounds + ")"
	}
	return "redis " + u.Redacted() + " (" + bounds + ", ttl " + cfg.storeTTL.String() + ")"
}
