package bench

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/tetherd/tether/sampler/sim"
)

// Transport names, in the order the bench runs and reports them.
const (
	HTTP     = "http"      // stateless POST, full history each turn, SSE, store:false
	HTTPPrev = "http-prev" // POST with previous_response_id, store:true, SSE
	WS       = "ws"        // public shape over one WebSocket, previous_response_id
	Append   = "append"    // append shape: response.create, then response.append per turn
	// Engine drives the engine at Config.Engine directly: POST /chat/completions with the whole
	// message list each turn, stream:true, no Tether in between.
	Engine = "engine"
)

// Transports lists Tether's four transports, in report order.
var Transports = []string{HTTP, HTTPPrev, WS, Append}

// allTransports is every transport in report order: the engine first, the baseline the others
// are compared with.
var allTransports = []string{Engine, HTTP, HTTPPrev, WS, Append}

// Presets are the sim speed presets the end-to-end times are derived for.
var Presets = []sim.Speed{sim.Speed65, sim.Speed1000, sim.Speed4000}

// Config is one bench run. The zero value of a field means its default (see Defaults).
type Config struct {
	// URL is the server's base URL (http://host:port; ws:// and a /v1/responses path are
	// accepted too). Required: Run does not spawn servers (see Spawn).
	URL string
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string
	// PID is the server process whose CPU time is read from /proc/<pid>/stat; 0 means no CPU
	// numbers.
	PID int
	// Spawned records that the bench started the server itself (reported only).
	Spawned bool

	// Model is the model of every request. "" asks the server's GET /v1/models: "sim" when it
	// lists the sim, else its first model. A model other than "sim" runs the bench in engine
	// mode (package doc): K+1 turns per rollout whether or not the model calls the tool,
	// max_output_tokens MaxOutputTokens and temperature 0 on every request, no sim metadata,
	// and no events/s or turns/s measurements.
	Model string
	// Engine is the /v1 base URL of the Chat Completions engine behind the server (e.g.
	// http://127.0.0.1:8081/v1). When set, the engine transport drives it directly beside
	// Tether's transports, with the same workload; it implies engine mode.
	Engine string
	// EngineAPIKey, when set, is sent to Engine as "Authorization: Bearer <key>".
	EngineAPIKey string
	// MaxOutputTokens bounds each turn's output in engine mode; 0 means
	// DefaultMaxOutputTokens.
	MaxOutputTokens int

	// Transports to run, a subset of Transports and Engine; nil means all four, and the
	// engine transport too when Engine is set.
	Transports []string
	// Rollouts (R) per transport and Calls (K) tool calls per rollout: K+1 turns each. 0 means
	// DefaultCalls, or DefaultEngineCalls in engine mode.
	Rollouts int
	Calls    int
	// ToolOutputBytes is the size of each tool output (in engine mode also of each follow-up
	// user message); 0 means DefaultToolOutputBytes, or DefaultEngineToolOutputBytes in engine
	// mode.
	ToolOutputBytes int
	// WarmupCalls is the length of one discarded warm-up rollout per transport; negative
	// means none.
	WarmupCalls int

	// Realtime runs the sim at RealtimeSpeed in real time (metadata sim.speed) instead of
	// instant: overheads then include model time, and end-to-end times are measured.
	Realtime      bool
	RealtimeSpeed sim.Speed

	// StreamTokens is the answer length (metadata sim.answer_tokens) of the single-rollout
	// events/s measurement; negative skips it, and so does 0 with Realtime.
	StreamTokens int
	// Concurrent rollouts of ConcurrentTokens each for the aggregate events/s; negative
	// Concurrent skips it, and so does 0 with Realtime.
	Concurrent       int
	ConcurrentTokens int
	// ConcurrentCalls is the tool calls per rollout of the aggregate turns/s measurement
	// (Concurrent rollouts at once); negative skips it, and so does 0 with Realtime.
	ConcurrentCalls int
	// ServerCPUs is the spawned server's GOMAXPROCS (reported only; 0: the Go default).
	ServerCPUs int

	// Timeout bounds the whole run.
	Timeout time.Duration
	// Progress receives progress lines (see package internal/progress); nil means none.
	Progress io.Writer
	// OnTurn, when set, is called with each turn's sample as soon as the turn has been
	// measured (its floor included), from the goroutine running the transport: transport is
	// the transport's name, s.Rollout is 0 for a warm-up turn and 1..Rollouts otherwise. It
	// must not block for long: the next turn starts when it returns (tether serve -ui streams
	// these samples to its page).
	OnTurn func(transport string, s TurnSample)
}

// Defaults: sized so that a run finishes in under 2 minutes on 2 cores, reaches turn 200,
// and a rollout's history reaches about 100k tokens at its end.
const (
	DefaultRollouts         = 3
	DefaultCalls            = 200
	DefaultToolOutputBytes  = 2048
	DefaultWarmupCalls      = 5
	DefaultStreamTokens     = 200_000
	DefaultConcurrent       = 100
	DefaultConcurrentTokens = 2_000
	DefaultConcurrentCalls  = 50
	DefaultTimeout          = 10 * time.Minute
	// DefaultEngineCalls and DefaultEngineToolOutputBytes size engine mode's rollouts to fit
	// a small context (5 turns of about 170 tokens each with the test model's tokenizer).
	DefaultEngineCalls           = 4
	DefaultEngineToolOutputBytes = 256
	// DefaultMaxOutputTokens is max_output_tokens of each turn in engine mode: the turn
	// measures the server and the engine's prefill, not a long answer.
	DefaultMaxOutputTokens = 32
)

func (c *Config) defaults() error {
	if c.URL == "" {
		return fmt.Errorf("bench: no server URL")
	}
	if len(c.Transports) == 0 {
		c.Transports = Transports
		if c.Engine != "" {
			c.Transports = allTransports
		}
	}
	for _, t := range c.Transports {
		if !known(t) {
			return fmt.Errorf("bench: unknown transport %q (want %s)", t, strings.Join(allTransports, ", "))
		}
		if t == Engine && c.Engine == "" {
			return fmt.Errorf("bench: the engine transport needs the engine's URL (Config.Engine, -engine)")
		}
	}
	if c.Engine != "" {
		if _, err := url.Parse(c.Engine); err != nil || !strings.HasPrefix(c.Engine, "http://") && !strings.HasPrefix(c.Engine, "https://") {
			return fmt.Errorf("bench: bad engine URL %q: want the engine's http(s)://host:port/v1", c.Engine)
		}
	}
	if c.MaxOutputTokens < 0 {
		return fmt.Errorf("bench: max output tokens %d: want 0 or more", c.MaxOutputTokens)
	}
	if c.MaxOutputTokens == 0 {
		c.MaxOutputTokens = DefaultMaxOutputTokens
	}
	// Report order, whatever order they were given in.
	var ordered []string
	for _, t := range allTransports {
		for _, u := range c.Transports {
			if t == u {
				ordered = append(ordered, t)
				break
			}
		}
	}
	c.Transports = ordered
	if c.Rollouts <= 0 {
		c.Rollouts = DefaultRollouts
	}
	if c.WarmupCalls == 0 {
		c.WarmupCalls = DefaultWarmupCalls
	}
	if c.Realtime && c.RealtimeSpeed == sim.SpeedInstant {
		c.RealtimeSpeed = sim.Speed1000
	}
	if c.StreamTokens == 0 {
		c.StreamTokens = DefaultStreamTokens
		if c.Realtime {
			c.StreamTokens = -1 // paced by the model: nothing to learn about the server
		}
	}
	if c.Concurrent == 0 {
		c.Concurrent = DefaultConcurrent
		if c.Realtime {
			c.Concurrent = -1
		}
	}
	if c.ConcurrentTokens <= 0 {
		c.ConcurrentTokens = DefaultConcurrentTokens
	}
	if c.ConcurrentCalls == 0 {
		c.ConcurrentCalls = DefaultConcurrentCalls
		if c.Realtime {
			c.ConcurrentCalls = -1
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return nil
}

// modeDefaults sets the defaults that depend on the mode, once it is known.
func (c *Config) modeDefaults(engine bool) {
	if c.Calls <= 0 {
		c.Calls = DefaultCalls
		if engine {
			c.Calls = DefaultEngineCalls
		}
	}
	if c.ToolOutputBytes <= 0 {
		c.ToolOutputBytes = DefaultToolOutputBytes
		if engine {
			c.ToolOutputBytes = DefaultEngineToolOutputBytes
		}
	}
}

func known(t string) bool {
	for _, u := range allTransports {
		if t == u {
			return true
		}
	}
	return false
}

// ParseTransports parses a comma-separated list of transport names ("" or "all": Tether's
// four; "engine" is the engine transport, which needs Config.Engine).
func ParseTransports(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return Transports, nil
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if !known(t) {
			return nil, fmt.Errorf("unknown transport %q (want %s)", t, strings.Join(allTransports, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

// endpoints are the URLs derived from Config.URL.
type endpoints struct {
	base      string // http://host:port
	responses string // http://host:port/v1/responses
	ws        string // ws://host:port/v1/responses
}

func parseEndpoints(raw string) (endpoints, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoints{}, fmt.Errorf("bench: bad URL %q: %w", raw, err)
	}
	var hs, ws string
	switch u.Scheme {
	case "http", "ws":
		hs, ws = "http", "ws"
	case "https", "wss":
		hs, ws = "https", "wss"
	default:
		return endpoints{}, fmt.Errorf("bench: bad URL %q: want http://, https://, ws:// or wss://", raw)
	}
	if u.Host == "" {
		return endpoints{}, fmt.Errorf("bench: bad URL %q: no host", raw)
	}
	base := hs + "://" + u.Host
	return endpoints{base: base, responses: base + "/v1/responses", ws: ws + "://" + u.Host + "/v1/responses"}, nil
}
