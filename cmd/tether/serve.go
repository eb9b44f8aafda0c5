package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session"
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
	readTimeout    time.Duration
	idleTimeout    time.Duration
	maxHTTPConns   int
	maxMemory      byteSize
	maxDecoding    int
	keyRollouts    int
	keyConns       int
	keyStored      int
	keyStoredBytes byteSize
}

func serveFlags(fs *flag.FlagSet) *serveConfig {
	c := &serveConfig{maxFrame: 32 << 20, cacheBytes: 64 << 20, storeBytes: 256 << 20, maxRollout: 64 << 20,
		maxMemory: byteSize(server.DefaultMaxMemory()), keyStoredBytes: server.DefaultKeyStoredBytes}
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
	fs.Var(&c.maxRollout, "max-rollout-bytes", "bytes one rollout may hold: items, tools, instructions, settings (over it: rollout_too_large; 0 = no cap)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.DurationVar(&c.readTimeout, "read-timeout", server.DefaultReadTimeout, "a POST body not received within this gets 408 and its connection is closed")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "an HTTP keep-alive connection idle this long is closed")
	fs.IntVar(&c.maxHTTPConns, "max-http-connections", server.DefaultMaxHTTPConnections, "accepted TCP connections, WebSockets included (at it: the longest-idle keep-alive is closed; then only /healthz is served; 0 = no bound)")
	fs.Var(&c.maxMemory, "max-memory", "server-wide bytes of frames and POST bodies being read and decoded (4 per received byte) plus items and settings held by rollouts (over it: 503 server_overloaded; default: an eighth of the machine's or cgroup's memory; 0 = no bound)")
	fs.IntVar(&c.keyRollouts, "key-rollouts", server.DefaultKeyRollouts, "live rollouts per API key (per client address on an open server; over it: 429 quota_exceeded; 0 = no quota)")
	fs.IntVar(&c.keyConns, "key-connections", server.DefaultKeyConnections, "WebSocket connections per API key or client address (over it: 429 quota_exceeded; 0 = no quota)")
	fs.IntVar(&c.keyStored, "key-store-responses", server.DefaultKeyStoredResponses, "stored responses per API key or client address (over it the key's own oldest are evicted; 0 = no quota)")
	fs.Var(&c.keyStoredBytes, "key-store-bytes", "stored bytes per API key or client address (over it the key's own oldest are evicted; 0 = no quota)")
	fs.IntVar(&c.maxDecoding, "max-decoding", server.DefaultMaxDecoding, "POST bodies read and decoded at once (over it: 503 server_overloaded; 0 = no bound)")
	return c
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

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := serveFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if m := int64(cfg.maxMemory); m > 0 && m < session.DecodeFactor*int64(cfg.maxFrame) {
		return fmt.Errorf("-max-memory %s is less than %d × -max-frame: no frame of the largest size could be read", formatBytes(int64(cfg.maxMemory)), session.DecodeFactor)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	speed, err := sampler.ParseSpeed(cfg.speed)
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
	srv := server.New(server.Options{
		Model:              sampler.NewSim(sampler.SimOptions{Speed: speed, Realtime: true}),
		MaxFrame:           int64(cfg.maxFrame),
		MaxConnectionAge:   cfg.maxAge,
		SuspendTimeout:     cfg.suspendTimeout,
		QueueDepth:         cfg.queueDepth,
		CacheResponses:     cfg.cacheResponses,
		CacheBytes:         int64(cfg.cacheBytes),
		ShutdownGrace:      grace,
		StoreResponses:     cfg.storeResponses,
		StoreBytes:         int64(cfg.storeBytes),
		Keys:               keys,
		DisableWebSocket:   !cfg.websocket,
		MaxConnections:     cfg.maxConns,
		PingInterval:       cfg.pingInterval,
		WriteTimeout:       cfg.writeTimeout,
		MaxSuspended:       cfg.maxSuspended,
		MaxSuspendedTotal:  cfg.maxSuspTotal,
		MaxRolloutBytes:    int64(cfg.maxRollout),
		Logger:             log,
		ReadTimeout:        orNone(cfg.readTimeout),
		IdleTimeout:        orNone(cfg.idleTimeout),
		MaxHTTPConnections: cfg.maxHTTPConns,
		MaxMemory:          int64(cfg.maxMemory),
		MaxDecoding:        cfg.maxDecoding,
	})
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs, limited := srv.HTTPServer(ln)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limited) }()
	if keys.Open() {
		log.Warn("no API keys configured: the server is open to anyone who can reach it (use -api-keys FILE)")
	}
	log.Info("tether listening", "addr", ln.Addr().String(), "model", "sim", "speed", cfg.speed,
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
