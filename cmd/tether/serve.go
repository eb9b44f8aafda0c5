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
	"os"
	"strings"
	"time"

	"github.com/tetherd/tether/backend/responses"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
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
	apiKeys        string
	websocket      bool
	maxConns       int
	pingInterval   time.Duration
	writeTimeout   time.Duration
	maxSuspended   int
	maxSuspTotal   int64
	maxRollout     byteSize
	logLevel       string
	maxSampling    int
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
	fs.IntVar(&c.storeResponses, "store-responses", 10000, "in-memory Store bound (responses)")
	fs.Var(&c.storeBytes, "store-bytes", "in-memory Store bound (bytes)")
	fs.StringVar(&c.apiKeys, "api-keys", "", "file of accepted API keys, one per line (none = open server)")
	fs.BoolVar(&c.websocket, "websocket", true, "serve WebSocket upgrades (false answers them 426, so clients fall back to HTTP)")
	fs.IntVar(&c.maxConns, "max-connections", 1024, "open WebSocket connections (over it: 503 on upgrade; 0 = no cap)")
	fs.DurationVar(&c.pingInterval, "ping-interval", 30*time.Second, "protocol ping interval; a peer that misses a pong is dropped (0 = no pings)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 30*time.Second, "a client that does not read one frame within this is dropped")
	fs.IntVar(&c.maxSuspended, "max-suspended", 64, "live rollouts per connection (over it: rollout_limit_reached; 0 = no cap)")
	fs.Int64Var(&c.maxSuspTotal, "max-suspended-total", 10000, "live rollouts in the whole server (0 = no cap)")
	fs.Var(&c.maxRollout, "max-rollout-bytes", "item bytes one rollout may hold (over it: rollout_too_large; 0 = no cap)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.IntVar(&c.maxSampling, "max-sampling", 0, "sampling steps running at once across all connections (0 = no bound)")
	fs.StringVar(&c.backend, "backend", "sim", "model backend: sim, chat (an OpenAI-compatible Chat Completions engine) or responses (an upstream Responses API over WebSocket)")
	fs.StringVar(&c.upstream, "upstream", "", "the upstream engine's URL (backends chat and responses)")
	fs.StringVar(&c.upstreamKey, "upstream-api-key-file", "", "file holding the API key sent to the upstream (backends chat and responses)")
	fs.DurationVar(&c.upstreamTO, "upstream-timeout", 5*time.Minute, "longest silence from the upstream within one sampling step before the step fails")
	return c
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := serveFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	speed, err := sim.ParseSpeed(cfg.speed)
	if err != nil {
		return fmt.Errorf("-model-speed: %w", err)
	}
	var keys *server.Keys
	if cfg.apiKeys != "" {
		if keys, err = server.LoadKeys(cfg.apiKeys); err != nil {
			return err
		}
	}
	grace := cfg.shutdownGrace
	if grace <= 0 {
		grace = -1 // session: no grace
	}
	model, err := newModel(cfg, speed, log)
	if err != nil {
		return err
	}
	srv := server.New(server.Options{
		Model:             model,
		MaxFrame:          int64(cfg.maxFrame),
		MaxConnectionAge:  cfg.maxAge,
		SuspendTimeout:    cfg.suspendTimeout,
		QueueDepth:        cfg.queueDepth,
		CacheResponses:    cfg.cacheResponses,
		CacheBytes:        int64(cfg.cacheBytes),
		ShutdownGrace:     grace,
		StoreResponses:    cfg.storeResponses,
		StoreBytes:        int64(cfg.storeBytes),
		Keys:              keys,
		DisableWebSocket:  !cfg.websocket,
		MaxConnections:    cfg.maxConns,
		PingInterval:      cfg.pingInterval,
		WriteTimeout:      cfg.writeTimeout,
		MaxSuspended:      cfg.maxSuspended,
		MaxSuspendedTotal: cfg.maxSuspTotal,
		MaxRolloutBytes:   int64(cfg.maxRollout),
		MaxSampling:       cfg.maxSampling,
		Logger:            log,
	})
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if keys.Open() {
		log.Warn("no API keys configured: the server is open to anyone who can reach it (use -api-keys FILE)")
	}
	log.Info("tether listening", "addr", ln.Addr().String(), "model", cfg.backend, "speed", cfg.speed,
		"append", "OpenAI-Beta: "+server.AppendBeta)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", cfg.shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace+10*time.Second)
	defer cancel()
	werr := srv.Shutdown(sctx)
	herr := hs.Shutdown(sctx)
	<-errc
	if err := errors.Join(werr, herr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
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
		log.Info("backend responses", "upstream", m.URL())
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
