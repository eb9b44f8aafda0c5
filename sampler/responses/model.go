package responses

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/simmeta"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Options configure the backend. URL is required.
type Options struct {
	// URL is the upstream: its WebSocket endpoint ("ws://host:port/v1/responses",
	// "wss://api.openai.com/v1/responses") or its HTTP base URL ("http://host:port/v1"), from
	// which the ws(s) URL is derived (see WebSocketURL).
	URL string
	// APIKey is sent as "Authorization: Bearer APIKey" on the upgrade request; empty: none.
	APIKey string
	// Timeout bounds the upstream's silence within a step: the dial, then each wait for data,
	// which every piece of a frame that arrives (4 KiB, or the frame's end) resets, so a large
	// frame that arrives slowly is not silence. Longer, and the step fails ("upstream silent
	// for …"). 0 means 5 minutes.
	Timeout time.Duration
	// ReadLimit is the largest upstream frame in bytes; 0 means 64 MiB. The frames a step has
	// not taken yet are held up to about this many bytes too: the socket reads no further
	// until the step catches up.
	ReadLimit int64
	// StepTimeout bounds one sampling step's total time (waiting for the connection's socket,
	// every frame, retries), however steadily the upstream streams: longer, and the step
	// fails. 0 means 30 minutes.
	StepTimeout time.Duration
	// MaxStepBytes bounds the text and function-call arguments the upstream streams in one
	// step, in bytes: more, and the step fails. 0 means 32 MiB. The step's max_output_tokens
	// is enforced too: a step streamed past it ends incomplete (max_output_tokens).
	MaxStepBytes int
	// MaxArgumentBytes bounds one function call's arguments, in bytes. 0 means 16 MiB.
	MaxArgumentBytes int
	// MaxOutputTokens bounds the tokens of one step when the request's max_output_tokens is
	// unset or larger: a step the upstream streams past it ends incomplete
	// (max_output_tokens). It is enforced on what the upstream streams only, never sent
	// upstream. 0 means sampler.DefaultMaxOutputTokens, negative none (MaxStepBytes still
	// bounds the step).
	MaxOutputTokens int
}

// Model is the responses backend (sampler.Model). It is safe for concurrent use.
type Model struct {
	opts Options
	url  string

	mu    sync.Mutex
	conns map[string]*upstream // by RolloutInfo.ConnID and Lane
}

// New returns the backend for opts, or an error when opts.URL is not a ws, wss, http or https
// URL.
func New(opts Options) (*Model, error) {
	u, err := WebSocketURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = 64 << 20
	}
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 30 * time.Minute
	}
	if opts.MaxStepBytes <= 0 {
		opts.MaxStepBytes = 32 << 20
	}
	if opts.MaxArgumentBytes <= 0 {
		opts.MaxArgumentBytes = 16 << 20
	}
	switch {
	case opts.MaxOutputTokens == 0:
		opts.MaxOutputTokens = sampler.DefaultMaxOutputTokens
	case opts.MaxOutputTokens < 0:
		opts.MaxOutputTokens = 0
	}
	return &Model{opts: opts, url: u, conns: map[string]*upstream{}}, nil
}

// WebSocketURL returns the upstream's WebSocket URL: a ws or wss URL as it is; an http or
// https base URL with the scheme switched to ws / wss and "/responses" appended unless its
// path already ends with it ("http://h:8788/v1" → "ws://h:8788/v1/responses"), as the OpenAI
// SDKs derive it.
func WebSocketURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("upstream URL %q: want ws(s)://host/v1/responses or http(s)://host/v1", raw)
	}
	switch u.Scheme {
	case "ws", "wss":
		return u.String(), nil
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("upstream URL %q: scheme %q, want ws, wss, http or https", raw, u.Scheme)
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/responses") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/responses"
	}
	return u.String(), nil
}

// URL returns the upstream WebSocket URL the model dials.
func (m *Model) URL() string { return m.url }

// Open implements sampler.Model: the session shares the upstream socket of its connection's
// lane (dialled on the first Sample). Each lane of a client connection has its own socket, so
// lanes sample concurrently upstream too, and a rollout's chain of previous_response_ids stays
// on one socket.
func (m *Model) Open(_ context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	key := info.ConnID
	if info.Lane != "" {
		key += "/" + info.Lane
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	up := m.conns[key]
	if up == nil {
		up = newUpstream(m, info.Budget)
		m.conns[key] = up
	}
	up.refs++
	return &session{up: up, settings: info.Settings, connID: key}, nil
}

// CheckRequest implements sampler.RequestChecker: "sim.*" metadata keys are checked as the
// sim checks them (simmeta.Check). They are forwarded upstream, where a Tether running the
// sim would reject a bad one only after this server had started the response; other
// upstreams ignore them. Everything else is the upstream's to judge.
func (m *Model) CheckRequest(p *protocol.CreateParams) error {
	return simmeta.Check(p.Metadata)
}

// release drops a session's reference to its connection's upstream; the last one closes it.
func (m *Model) release(connID string, up *upstream) {
	m.mu.Lock()
	up.refs--
	last := up.refs == 0
	if last && m.conns[connID] == up {
		delete(m.conns, connID)
	}
	m.mu.Unlock()
	if last {
		up.close()
	}
}
