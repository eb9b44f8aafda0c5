package chat

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/chatapi"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Options configures a Model.
type Options struct {
	// BaseURL is the engine's API base, e.g. "http://127.0.0.1:8080/v1"; requests go to
	// BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer …" when non-empty.
	APIKey string
	// Model replaces the client's model name in upstream requests when non-empty.
	Model string
	// Timeout is the longest silence from the upstream within one sampling step. 0 means 5m.
	Timeout time.Duration
	// Slots is the number of engine slots to pin rollouts to (id_slot 0…Slots-1); 0 pins none.
	Slots int
	// LegacyMaxTokens sends max_tokens besides max_completion_tokens.
	LegacyMaxTokens bool
	// Client sends the requests. Nil means a client with no overall timeout that keeps up to
	// 64 idle connections to the engine.
	Client *http.Client
}

// Model is the chat backend (package doc). Safe for concurrent use.
type Model struct {
	opts   Options
	url    string
	client *http.Client
	mu     sync.Mutex
	free   []int // slot ids not pinned by a rollout; last freed is taken first
	pinned atomic.Int64
}

// New returns the chat backend for opts.
func New(opts Options) *Model {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	m := &Model{opts: opts, url: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions", client: opts.Client}
	if m.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64 // one connection per concurrent step, kept for the next
		m.client = &http.Client{Transport: tr}
	}
	for i := max(opts.Slots, 0) - 1; i >= 0; i-- {
		m.free = append(m.free, i)
	}
	return m
}

// Pinned returns the number of engine slots pinned by open rollouts now.
func (m *Model) Pinned() int { return int(m.pinned.Load()) }

// Open implements sampler.Model: the session pins a free engine slot when Options.Slots > 0
// and one is free: the one freed last, whose cache most likely holds this conversation when a
// client continues it on the cold path.
func (m *Model) Open(_ context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	s := &session{m: m, settings: info.Settings, slot: -1}
	if info.Settings.Instructions != "" {
		s.msgs = append(s.msgs, chatapi.Message{Role: protocol.RoleSystem, Content: chatapi.TextContent(info.Settings.Instructions)})
	}
	m.mu.Lock()
	if n := len(m.free); n > 0 {
		s.slot, m.free = m.free[n-1], m.free[:n-1]
		m.pinned.Add(1)
	}
	m.mu.Unlock()
	return s, nil
}

// CheckRequest implements sampler.RequestChecker: items a Chat Completions engine cannot take
// are rejected with a 400 naming them.
func (m *Model) CheckRequest(p *protocol.CreateParams) error {
	if err := chatapi.CheckItems(p.Input); err != nil {
		return err
	}
	return nil
}

// release returns a pinned slot.
func (m *Model) release(slot int) {
	if slot >= 0 {
		m.mu.Lock()
		m.free = append(m.free, slot)
		m.mu.Unlock()
		m.pinned.Add(-1)
	}
}
