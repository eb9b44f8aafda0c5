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
	"strconv"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/ui"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/responses"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

type serveConfig struct {
	addr              string
	speed             string
	modelContext      int
	maxFrame          byteSize
	maxAge            time.Duration
	suspendTimeout    time.Duration
	parkAfter         time.Duration
	parkUnstored      bool
	shutdownGrace     time.Duration
	queueDepth        int
	maxInflight       int
	maxLanes          int
	cacheResponses    int
	cacheBytes        byteSize
	storeResponses    int
	storeBytes        byteSize
	storeURL          string
	storeTTL          time.Duration
	storeTimeout      time.Duration
	apiKeys           string
	compactionKey     string
	websocket         bool
	maxConns          int
	pingInterval      time.Duration
	writeTimeout      time.Duration
	maxSuspended      int
	maxSuspTotal      int64
	maxRollout        byteSize
	logLevel          string
	logFormat         string
	pprof             bool
	maxSampling       int
	keepAlive         time.Duration
	backend           string
	upstream          string
	upstreamKey       string
	upstreamTO        time.Duration
	upstreamStepTO    time.Duration
	upstreamTokens    int
	slots             int
	upstreamSlots     int
	upstreamSlotDir   string
	upstreamSlotBytes byteSize
	upstreamModel     string
	upstreamLegacy    bool
	readTimeout       time.Duration
	idleTimeout       time.Duration
	maxHTTPConns      int
	maxMemory         byteSize
	maxDecoding       int
	keyRollouts       int
	keyConns          int
	keyShare          float64
	keyStored         storeQuota
	keyStoredBytes    storeQuota
	ui                bool
	uiRaceTimeout     time.Duration
	metricsAddr       string
	metricsKey        string
}

func serveFlags(fs *flag.FlagSet) *serveConfig {
	c := &serveConfig{maxFrame: 32 << 20, cacheBytes: 64 << 20, storeBytes: 256 << 20, maxRollout: 64 << 20,
		maxMemory: byteSize(server.DefaultMaxMemory())}
	c.keyStoredBytes.bytes = true
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8787", "listen address")
	fs.StringVar(&c.speed, "model-speed", "1000", "sim preset: instant, 65, 1000 or 4000 (decode tokens/s; a step also waits its time to first token and its uncached prompt at 20× that rate, so a prompt of millions of tokens takes minutes: instant to test large inputs)")
	fs.IntVar(&c.modelContext, "model-context", defaultModelContext, "the sim's context window in tokens of its rendered context: input that would take a conversation past it ends the response failed with context_length_exceeded, found after tokenizing at most the window's worth of it, and output that fills it ends the response incomplete (context_length_exceeded) (0 = no window)")
	fs.Var(&c.maxFrame, "max-frame", "largest client frame / POST body (e.g. 32MiB)")
	fs.DurationVar(&c.maxAge, "max-connection-age", 60*time.Minute, "WebSocket connection age limit (0 = none)")
	fs.DurationVar(&c.suspendTimeout, "suspend-timeout", 10*time.Minute, "how long a suspended rollout waits for input")
	fs.DurationVar(&c.parkAfter, "park-after", 30*time.Second, "park a WebSocket rollout suspended this long: its goroutine ends, its state is kept as one value, and the next append (or hot continuation) resumes it hot; with -store redis://… a reattaching client's rollout is written to the store as it parks (one write per park), so it survives this instance (0 = never park, not even to make room in -max-memory)")
	fs.BoolVar(&c.parkUnstored, "park-unstored", false, "with -store redis://…: when they park and on shutdown, park the suspended store:false rollouts of reattaching append-shape clients and of public-shape WebSocket clients to the shared store too (it persists what the client asked not to store, for at most -suspend-timeout, deleted on resume or expiry)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 30*time.Second, "how long in-flight responses may finish on shutdown")
	fs.IntVar(&c.queueDepth, "queue-depth", 16, "queued creates/appends per lane of a connection")
	fs.IntVar(&c.maxInflight, "max-inflight", 16, "lanes (stream_id) of one WebSocket connection that sample at once (0 = no cap)")
	fs.IntVar(&c.maxLanes, "max-lanes", 32, "distinct named lanes (stream_id) one WebSocket connection may use (0 = no cap)")
	fs.IntVar(&c.cacheResponses, "cache-responses", 128, "per-connection registry bound (responses)")
	fs.Var(&c.cacheBytes, "cache-bytes", "per-connection registry bound (bytes)")
	fs.IntVar(&c.storeResponses, "store-responses", 10000, "store bound (responses, least recently used evicted first)")
	fs.Var(&c.storeBytes, "store-bytes", "store bound (bytes)")
	fs.StringVar(&c.storeURL, "store", "memory", "where store:true responses live: memory, or redis://host:port/db (shared by several instances)")
	fs.DurationVar(&c.storeTTL, "store-ttl", store.DefaultTTL, "Redis store: a stored response expires this long after its last use")
	fs.DurationVar(&c.storeTimeout, "store-timeout", store.DefaultTimeout, "bound on every store call; a store that fails or is slower gets store_unavailable")
	fs.StringVar(&c.apiKeys, "api-keys", "", "file of accepted API keys, one per line (none = open server)")
	fs.StringVar(&c.compactionKey, "compaction-key-file", "", "file of the secret that signs compaction items, one per line, the first signs, all verify (each >= 32 bytes; share it across instances; none = a random key per process)")
	fs.BoolVar(&c.websocket, "websocket", true, "serve WebSocket upgrades (false answers them 426, so clients fall back to HTTP)")
	fs.IntVar(&c.maxConns, "max-connections", 1024, "open WebSocket connections (over it: 503 on upgrade; 0 = no cap)")
	fs.DurationVar(&c.pingInterval, "ping-interval", 30*time.Second, "protocol ping interval; a peer that misses a pong is dropped, unless it is still reading what was sent before the ping (0 = no pings)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 30*time.Second, "a write to a client that does not finish within this drops the client (writes block once the socket buffers, up to a few MiB, are full)")
	fs.IntVar(&c.maxSuspended, "max-suspended", 64, "live rollouts per connection (over it: rollout_limit_reached; 0 = no cap)")
	fs.Int64Var(&c.maxSuspTotal, "max-suspended-total", 10000, "live rollouts in the whole server (0 = no cap)")
	fs.Var(&c.maxRollout, "max-rollout-bytes", "bytes one rollout may hold: items, tools, instructions, settings (over it: rollout_too_large; 0 = no cap)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error (the access log is at info)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text (logfmt) or json")
	fs.BoolVar(&c.pprof, "pprof", false, "serve /debug/pprof/ (behind the API keys when -api-keys is set)")
	fs.IntVar(&c.maxSampling, "max-sampling", 0, "sampling steps running at once across all connections (0 = no bound with -backend sim; -upstream-slots with -backend chat; 64 with -backend responses)")
	fs.DurationVar(&c.keepAlive, "keepalive", 5*time.Second, "longest silence while a response samples before a keepalive response.in_progress is sent (negative = none)")
	fs.StringVar(&c.backend, "backend", "sim", "model backend: sim, chat (an OpenAI-compatible Chat Completions engine) or responses (an upstream Responses API over WebSocket)")
	fs.StringVar(&c.upstream, "upstream", "", "the upstream engine's URL (backends chat and responses)")
	fs.StringVar(&c.upstreamKey, "upstream-api-key-file", "", "file holding the API key sent to the upstream (backends chat and responses)")
	fs.DurationVar(&c.upstreamTO, "upstream-timeout", 5*time.Minute, "longest silence from the upstream within one sampling step (no byte for that long; a large frame or event that arrives slowly is not silence) before the step fails; with -backend chat, also the longest a slot save or restore may take (at most 30s)")
	fs.DurationVar(&c.upstreamStepTO, "upstream-step-timeout", 30*time.Minute, "longest time of one sampling step from the upstream, however steadily it streams, before the step fails")
	fs.IntVar(&c.upstreamTokens, "upstream-max-output-tokens", sampler.DefaultMaxOutputTokens, "tokens one sampling step may stream from the upstream when the request's max_output_tokens is unset or larger; past them the response ends incomplete (max_output_tokens). Enforced on what the upstream streams, never sent to it (0 = no bound but the 32 MiB of text a step)")
	fs.IntVar(&c.upstreamSlots, "upstream-slots", 0, "backend chat: engine slots per replica that Tether owns; every request names one with id_slot (llama.cpp llama-server -np; 0 = the engine chooses)")
	fs.StringVar(&c.upstreamSlotDir, "upstream-slot-dir", "", "backend chat: the engine's --slot-save-path as this host sees it; a suspended rollout's KV is saved there when its slot is needed and restored before its next step (\"\" = its next step is prefilled again)")
	c.upstreamSlotBytes = 1 << 30
	fs.Var(&c.upstreamSlotBytes, "upstream-slot-bytes", "backend chat: bound on the bytes of saved slot files per replica (oldest dropped first)")
	fs.StringVar(&c.upstreamModel, "upstream-model", "", "backend chat: model name sent upstream instead of the client's (\"\" = the client's)")
	fs.BoolVar(&c.upstreamLegacy, "upstream-legacy-max-tokens", false, "backend chat: send max_tokens besides max_completion_tokens (Ollama, LM Studio)")
	fs.IntVar(&c.slots, "slots", 4, "llama.cpp-compatible slots of POST /v1/chat/completions (sessions kept open for KV reuse)")
	fs.DurationVar(&c.readTimeout, "read-timeout", server.DefaultReadTimeout, "a POST body not received within this gets 408 and its connection is closed")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "an HTTP keep-alive connection idle this long is closed")
	fs.IntVar(&c.maxHTTPConns, "max-http-connections", server.DefaultMaxHTTPConnections, "accepted TCP connections, WebSockets included (at it: the longest-idle keep-alive is closed; then only /healthz is served; 0 = no bound)")
	fs.Var(&c.maxMemory, "max-memory", "server-wide bytes of frames and POST bodies being read and decoded (4 per received byte) plus items and settings held by rollouts plus 16 KiB per suspended rollout whose goroutine waits (when a create, append or frame does not fit, the longest suspended ones are parked first to make room) plus frames queued to WebSocket peers (over it: 503 server_overloaded; default: an eighth of the machine's or cgroup's memory; 0 = no bound)")
	fs.IntVar(&c.keyRollouts, "key-rollouts", server.DefaultKeyRollouts, "live rollouts per API key (per client address on an open server; over it: 429 quota_exceeded; 0 = no quota)")
	fs.IntVar(&c.keyConns, "key-connections", server.DefaultKeyConnections, "WebSocket connections per API key or client address (over it: 429 quota_exceeded; 0 = no quota)")
	fs.Var(&c.keyStored, "key-store-responses", "stored responses per API key or client address (over it the key's own oldest are evicted; default: a quarter of -store-responses; 0 = no quota)")
	fs.Var(&c.keyStoredBytes, "key-store-bytes", "stored bytes per API key or client address (over it the key's own oldest are evicted; default: a quarter of -store-bytes; 0 = no quota)")
	fs.Float64Var(&c.keyShare, "key-share", session.DefaultKeyShare, "the fraction of the -max-decoding slots and of the -max-memory bytes of bodies and frames being decoded that one API key or client address may hold (over it: 503 server_overloaded), and of the -slots it may hold while another key uses them (over it: the chat completion waits); 0 or 1 = no share")
	fs.IntVar(&c.maxDecoding, "max-decoding", server.DefaultMaxDecoding, "POST bodies read and decoded at once (over it: 503 server_overloaded; 0 = no bound)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve GET /metrics on this address of its own (a port alone, or :port, listens on 127.0.0.1; \"\" = on -addr only, to an open server's clients or the -metrics-key-file key)")
	fs.StringVar(&c.metricsKey, "metrics-key-file", "", "file of the keys that may read GET /metrics, one per line (API keys get 403; none = /metrics on -addr is open on an open server and refused to every API key otherwise)")
	fs.BoolVar(&c.ui, "ui", false, "serve the live demo page at /ui/ (a race of the four transports, and the live connections)")
	fs.DurationVar(&c.uiRaceTimeout, "ui-race-timeout", ui.DefaultRaceTimeout, "longest race of the -ui page")
	return c
}

// serveGroups orders 'tether serve -h': the essentials first, then the upstream engine's
// flags, the limits, the tuning, and what is for operators and demos.
var serveGroups = []flagGroup{
	{"Essentials", []string{"addr", "api-keys", "backend", "upstream", "upstream-api-key-file", "store", "model-speed", "model-context", "config"}},
	{"Upstream engine (-backend chat or responses)", []string{"upstream-model", "upstream-slots", "upstream-slot-dir", "upstream-slot-bytes",
		"upstream-timeout", "upstream-step-timeout", "upstream-max-output-tokens", "upstream-legacy-max-tokens"}},
	{"Limits", []string{"max-frame", "max-memory", "max-connections", "max-http-connections",
		"max-suspended", "max-suspended-total", "max-rollout-bytes", "max-sampling", "max-decoding", "max-inflight", "max-lanes",
		"queue-depth", "key-rollouts", "key-connections", "key-share", "key-store-responses", "key-store-bytes"}},
	{"Tuning", []string{"suspend-timeout", "park-after", "park-unstored", "max-connection-age", "shutdown-grace", "keepalive", "ping-interval", "write-timeout",
		"read-timeout", "idle-timeout", "cache-responses", "cache-bytes", "store-responses", "store-bytes", "store-ttl",
		"store-timeout", "compaction-key-file", "websocket", "slots"}},
	{"Logs, metrics, profiling and the demo page", []string{"log-level", "log-format", "metrics-addr", "metrics-key-file", "pprof", "ui", "ui-race-timeout"}},
}

// storeQuota is the value of -key-store-responses (a count) or -key-store-bytes (a size, when
// bytes): unset means a quarter of the store's bound, so that the quota follows
// -store-responses and -store-bytes; 0 means no quota.
type storeQuota struct {
	n     int64
	set   bool
	bytes bool
}

func (q *storeQuota) String() string {
	switch {
	case !q.set:
		return "" // the default depends on the store's bound; the usage text tells it
	case q.bytes:
		return formatBytes(q.n)
	}
	return strconv.FormatInt(q.n, 10)
}

// Set parses a count, or a size for bytes (parseBytes).
func (q *storeQuota) Set(s string) error {
	var n int64
	var err error
	if q.bytes {
		n, err = parseBytes(s)
	} else if n, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil || n < 0 || n > 1<<31 {
		err = fmt.Errorf("invalid count %q: want a whole number from 0 (no quota) up", s)
	}
	if err != nil {
		return err
	}
	q.n, q.set = n, true
	return nil
}

// option is the server.Options value: 0 (a quarter of the store's bound) when unset, negative
// (no quota) for 0.
func (q *storeQuota) option() int64 {
	switch {
	case !q.set:
		return 0
	case q.n == 0:
		return -1
	}
	return q.n
}

// orNone maps a flag's 0 ("none") to the Options' negative "none".
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// orNoBound maps a flag's 0 ("no bound") to the Options' negative "none".
func orNoBound(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// orNoShare maps -key-share 0 (no share) to server.Options' negative.
func orNoShare(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "Run the server: the sim model by default, or an engine behind -backend chat or responses.", stderr, serveGroups...)
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
	if m := int64(cfg.maxMemory); m > 0 && m < session.DecodeFactor*int64(cfg.maxFrame) {
		return fmt.Errorf("-max-memory %s is less than %d × -max-frame (%s): no frame of the largest size could be read; raise -max-memory to at least %s or lower -max-frame",
			formatBytes(int64(cfg.maxMemory)), session.DecodeFactor, formatBytes(int64(cfg.maxFrame)), formatBytes(session.DecodeFactor*int64(cfg.maxFrame)))
	}

	store.LogRedisTo(log)
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	opts.Store, opts.StoreTimeout = st, cfg.storeTimeout
	gc := tuneGC(int64(cfg.maxMemory))
	srv := server.New(opts)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs, limited := srv.HTTPServer(ln)
	var page *ui.UI
	if cfg.ui {
		page = ui.New(ui.Options{Server: srv, URL: selfURL(ln.Addr()), RaceTimeout: cfg.uiRaceTimeout, Logger: log})
		hs.Handler = page.Handler(hs.Handler)
		defer page.Close() // after an early return; stop closes it before the drain
	}
	if cfg.metricsAddr != "" {
		ms, err := serveMetrics(cfg, srv, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer ms.Close()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limited) }()
	if opts.Keys.Open() {
		log.Warn("no API keys configured: the server is open to anyone who can reach it (use -api-keys FILE)")
	}
	log.Info("tether listening", append(startupAttrs(cfg, ln.Addr().String()), "gc", gc)...)
	if page != nil {
		log.Info("live demo page", "url", selfURL(ln.Addr())+ui.Prefix)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if page != nil {
		page.Close() // the race's connections end before the server drains
	}
	return stop(ctx, cfg, log, srv, hs, limited, errc)
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
	if cfg.metricsAddr != "" {
		if _, err := metricsAddr(cfg.metricsAddr); err != nil {
			return server.Options{}, err
		}
	}
	var metricsKeys *server.Keys
	if cfg.metricsKey != "" {
		if metricsKeys, err = server.LoadKeys(cfg.metricsKey); err != nil {
			return server.Options{}, fmt.Errorf("-metrics-key-file: %w", err)
		}
	}
	var compaction *session.Compactor
	if cfg.compactionKey != "" {
		if compaction, err = session.ReadCompactor(cfg.compactionKey); err != nil {
			return server.Options{}, fmt.Errorf("-compaction-key-file: %w", err)
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
		Model: model,
		Limits: session.Limits{
			MaxFrame:          int64(cfg.maxFrame),
			MaxConnectionAge:  cfg.maxAge,
			SuspendTimeout:    cfg.suspendTimeout,
			ParkAfter:         cfg.parkAfter,
			ParkUnstored:      cfg.parkUnstored,
			QueueDepth:        cfg.queueDepth,
			MaxInflight:       orNoBound(cfg.maxInflight),
			MaxLanes:          orNoBound(cfg.maxLanes),
			CacheResponses:    cfg.cacheResponses,
			CacheBytes:        int64(cfg.cacheBytes),
			ShutdownGrace:     grace,
			PingInterval:      cfg.pingInterval,
			WriteTimeout:      cfg.writeTimeout,
			MaxSuspended:      cfg.maxSuspended,
			MaxSuspendedTotal: cfg.maxSuspTotal,
			MaxRolloutBytes:   int64(cfg.maxRollout),
			KeepAlive:         cfg.keepAlive,
		},
		Keys:               keys,
		MetricsKeys:        metricsKeys,
		MetricsOwnListener: cfg.metricsAddr != "",
		Compaction:         compaction,
		DisableWebSocket:   !cfg.websocket,
		MaxConnections:     cfg.maxConns,
		Pprof:              cfg.pprof,
		MaxSampling:        cfg.maxSampling,
		Slots:              cfg.slots,
		Logger:             log,
		ReadTimeout:        orNone(cfg.readTimeout),
		IdleTimeout:        orNone(cfg.idleTimeout),
		MaxHTTPConnections: orNoBound(cfg.maxHTTPConns),
		MaxMemory:          int64(orNoBound(int(cfg.maxMemory))),
		MaxDecoding:        orNoBound(cfg.maxDecoding),
		KeyRollouts:        orNoBound(cfg.keyRollouts),
		KeyConnections:     orNoBound(cfg.keyConns),
		KeyShare:           orNoShare(cfg.keyShare),
		KeyStoredResponses: int(cfg.keyStored.option()),
		KeyStoredBytes:     cfg.keyStoredBytes.option(),
	}, nil
}

// metricsAddr is the listen address of -metrics-addr: a port alone ("9464") or an address
// without a host (":9464") listens on the loopback address only.
func metricsAddr(v string) (string, error) {
	if _, err := strconv.ParseUint(v, 10, 16); err == nil {
		v = ":" + v
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("%w: -metrics-addr %q: want host:port, :port or a port", errUsage, v)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveMetrics listens on -metrics-addr and serves GET /metrics there (server.MetricsHandler)
// until the returned server is closed.
func serveMetrics(cfg *serveConfig, srv *server.Server, log *slog.Logger) (*http.Server, error) {
	addr, err := metricsAddr(cfg.metricsAddr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	ms := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: server.DefaultHeaderTimeout,
		ReadTimeout: server.DefaultHeaderTimeout, WriteTimeout: 30 * time.Second, IdleTimeout: server.DefaultIdleTimeout}
	go func() { _ = ms.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String(), "metrics_key", cfg.metricsKey != "")
	return ms, nil
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
	attrs := []any{"addr", addr, "version", versionLine(), "backend", cfg.backend}
	if cfg.backend == "sim" {
		window := "none"
		if cfg.modelContext > 0 {
			window = fmt.Sprintf("%d tokens", cfg.modelContext)
		}
		attrs = append(attrs, "model_speed", cfg.speed, // the sim's preset; an engine has its own speed
			"model_context", window) // the sim's context window; an engine has its own
	} else {
		attrs = append(attrs, "upstream", upstreamLine(cfg))
	}
	return append(attrs, "shapes", shapes, "api_keys", keys, "compaction_key", compactionLine(cfg),
		"store", storeLine(cfg),
		"log_level", cfg.logLevel, "log_format", cfg.logFormat, "pprof", cfg.pprof, "shutdown_grace", cfg.shutdownGrace)
}

// compactionLine tells where the compaction items' key comes from, for the startup line.
func compactionLine(cfg *serveConfig) string {
	if cfg.compactionKey == "" {
		return "random per process"
	}
	return cfg.compactionKey
}

// stop shuts the server down after the first signal: the listener closes at once (no new
// connections), /healthz answers 503 and new creates 503 shutting_down on kept-alive
// connections, in-flight responses finish within -shutdown-grace, and a second signal ends
// the grace at once (every response still gets its terminal event).
func stop(ctx context.Context, cfg *serveConfig, log *slog.Logger, srv *server.Server, hs *http.Server, ln net.Listener, errc <-chan error) error {
	// Draining first: from the moment the listener refuses new connections, /healthz on a
	// kept-alive connection answers 503 and new creates are refused.
	srv.BeginShutdown()
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
	if errors.Is(herr, net.ErrClosed) {
		herr = nil // the listener was closed above, at the first signal
	}
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

// defaultResponsesMaxSampling is -max-sampling's default with -backend responses: at most this
// many steps are in flight upstream at once (each on its lane's upstream WebSocket), so that a
// burst of clients does not become a burst of upstream generations; the rest wait in the
// admission queue (tether_sampling_waiting). Raise it to what the upstream serves at once.
const defaultResponsesMaxSampling = 64

// defaultModelContext is -model-context's default: sim.DefaultContextWindow.
const defaultModelContext = sim.DefaultContextWindow

// newModel returns the backend that -backend names.
func newModel(cfg *serveConfig, speed sim.Speed, log *slog.Logger) (sampler.Model, error) {
	if err := checkBackend(cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch cfg.backend {
	case "sim":
		return sim.NewSim(sim.SimOptions{Speed: speed, Realtime: true, ContextWindow: cfg.modelContext}), nil
	case "chat":
		key, err := upstreamKey(cfg)
		if err != nil {
			return nil, err
		}
		if cfg.maxSampling == 0 {
			cfg.maxSampling = cfg.upstreamSlots * len(upstreamURLs(cfg)) // the engines' parallelism, when known
		}
		return newChat(cfg, key, log)
	case "responses":
		key, err := upstreamKey(cfg)
		if err != nil {
			return nil, err
		}
		if cfg.maxSampling == 0 {
			cfg.maxSampling = defaultResponsesMaxSampling
		}
		m, err := responses.New(responses.Options{URL: cfg.upstream, APIKey: key, Timeout: cfg.upstreamTO,
			StepTimeout: cfg.upstreamStepTO, MaxOutputTokens: orNoBound(cfg.upstreamTokens)})
		if err != nil {
			return nil, fmt.Errorf("-upstream: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("-backend %q: want sim, chat or responses", cfg.backend)
}

// upstreamURLs splits -upstream, a comma-separated list of replicas.
func upstreamURLs(cfg *serveConfig) []string {
	var urls []string
	for _, u := range strings.Split(cfg.upstream, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// newChat returns the chat backend of cfg, after asking its replicas what they tell of
// themselves (a slot count lower than -upstream-slots is an error).
func newChat(cfg *serveConfig, key string, log *slog.Logger) (sampler.Model, error) {
	m, err := chat.New(chat.Options{BaseURLs: upstreamURLs(cfg), APIKey: key, Model: cfg.upstreamModel,
		Timeout: cfg.upstreamTO, Slots: cfg.upstreamSlots, SlotDir: cfg.upstreamSlotDir,
		SlotFileTTL:   cfg.suspendTimeout + time.Minute, // a file is written while its rollout is suspended
		SlotSaveBytes: int64(cfg.upstreamSlotBytes), LegacyMaxTokens: cfg.upstreamLegacy, Logger: log,
		StepTimeout: cfg.upstreamStepTO, MaxOutputTokens: orNoBound(cfg.upstreamTokens)})
	if err != nil {
		return nil, fmt.Errorf("-upstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Probe(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if n := m.SlotContext(); n > 0 {
		log.Info("the upstream engine's slots hold "+strconv.Itoa(n)+" tokens each (llama-server -c divided by -np): "+
			"a longer conversation fails with context_length_exceeded", "slot_context_tokens", n)
	}
	if down := m.Unreachable(ctx); len(down) > 0 {
		log.Warn("the upstream engine answers none of GET /health, /healthz and / at its root (-upstream without its /v1): "+
			"it is not up, or -upstream is not its API base; its steps fail until it answers (slots and defaults were not checked)",
			"roots", strings.Join(down, ","))
	}
	return m, nil
}

// upstreamLine names the upstream for the startup line ("none" for the sim).
func upstreamLine(cfg *serveConfig) string {
	if cfg.backend == "sim" {
		return "none"
	}
	return cfg.upstream
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

// selfURL is the base URL at which this process reaches its own listener: the loopback
// address when it listens on every interface.
func selfURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1) // a dual-stack [::] listener accepts it too
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// checkBackend validates -backend and the upstream flags before anything is started: a known
// backend, an -upstream URL it can dial, and no upstream flags for the sim.
func checkBackend(cfg *serveConfig) error {
	switch cfg.backend {
	case "sim":
		if cfg.upstream != "" || cfg.upstreamKey != "" || cfg.upstreamSlots != 0 || cfg.upstreamModel != "" {
			return errors.New("-upstream, -upstream-api-key-file, -upstream-slots and -upstream-model need -backend chat or responses")
		}
		return nil
	case "chat", "responses":
	default:
		return fmt.Errorf("-backend %q: want sim, chat or responses", cfg.backend)
	}
	if cfg.upstream == "" {
		return fmt.Errorf("-backend %s needs -upstream URL", cfg.backend)
	}
	if cfg.upstreamTO <= 0 || cfg.upstreamStepTO <= 0 {
		return errors.New("-upstream-timeout and -upstream-step-timeout must be positive")
	}
	urls := upstreamURLs(cfg)
	if len(urls) > 1 && cfg.backend != "chat" {
		return fmt.Errorf("-upstream %q: several replicas need -backend chat", cfg.upstream)
	}
	if cfg.upstreamSlotDir != "" && (cfg.backend != "chat" || cfg.upstreamSlots == 0) {
		return errors.New("-upstream-slot-dir needs -backend chat and -upstream-slots")
	}
	schemes := map[string]bool{"http": true, "https": true}
	if cfg.backend == "responses" {
		schemes["ws"], schemes["wss"] = true, true
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("-upstream %q: want an absolute URL such as http://127.0.0.1:8080/v1", raw)
		}
		if !schemes[u.Scheme] {
			return fmt.Errorf("-upstream %q: scheme %q is not one -backend %s dials", raw, u.Scheme, cfg.backend)
		}
	}
	return nil
}
