package chat

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Options configures a Model.
type Options struct {
	// BaseURLs are the API bases of the engine's replicas, e.g. "http://127.0.0.1:8080/v1";
	// requests go to BaseURL + "/chat/completions", slot saves to the server root's /slots.
	// Every replica must serve the same model. At least one is required.
	BaseURLs []string
	// APIKey is sent as "Authorization: Bearer …" when non-empty.
	APIKey string
	// Model replaces the client's model name in upstream requests when non-empty.
	Model string
	// Timeout is the longest silence from the upstream within one sampling step (no byte of
	// its answer for that long; a slowly arriving event is not silence), and the
	// longest a slot save or restore may take when shorter than 30 s. 0 means 5m.
	Timeout time.Duration
	// Slots is the number of slots of each replica that Tether owns (llama.cpp -np): every
	// request names one (id_slot) and a suspended rollout keeps its slot until another rollout
	// needs it. 0 leaves slot choice to the engine (vLLM, OpenAI).
	Slots int
	// SlotDir is the directory the engine saves slots in (llama.cpp --slot-save-path), as
	// Tether sees it: when set, the KV of a suspended rollout whose slot is handed on is saved
	// there and restored before its next step, and Tether removes the files. "" disables saving:
	// such a rollout's next step is prefilled again. It needs one replica sharing Tether's
	// filesystem; with several replicas each must save to this same path. A parked rollout's
	// KV waits here too: Tether instances in front of one engine set the same directory, so
	// that any of them resumes a parked rollout hot (package doc, "Parking").
	SlotDir string
	// SlotSaveBytes bounds the bytes of saved slot files per replica, parked rollouts' files
	// included; the oldest are dropped first (those rollouts are prefilled again). 0 means 1 GiB.
	SlotSaveBytes int64
	// SlotFileTTL is the age (since the file's last change) after which a slot file of
	// Tether's naming (tether-<response id>-<16 hex digits>.bin) in SlotDir is removed,
	// whoever saved it and whether or not this instance knows it: at New, then at most every
	// TTL/4 (and once a minute) when a slot is saved. Every file is written while its rollout
	// is suspended, so set it to the suspend timeout (tether serve uses -suspend-timeout plus
	// one minute for clock skew); instances sharing SlotDir must use the same. 0 never removes
	// files it did not save itself: a file whose parked rollout is never resumed stays after
	// its instance exits.
	SlotFileTTL time.Duration
	// LegacyMaxTokens sends max_tokens besides max_completion_tokens.
	LegacyMaxTokens bool
	// Client sends the requests. Nil means a client with no overall timeout that keeps up to
	// 64 idle connections per replica.
	Client *http.Client
	// Logger receives one line per upstream failure (its kind and replica; never content or
	// keys). Nil discards.
	Logger *slog.Logger

	// Bounds on what the engine streams in one step (limits.go); over one, the step fails
	// with a server_error naming the bound. The step's max_output_tokens is enforced too: a
	// step the engine streams past it ends incomplete (max_output_tokens).

	// StepTimeout bounds a step's total time, from the engine's answer to the end of its
	// stream, however steadily it streams. 0 means 30 minutes.
	StepTimeout time.Duration
	// MaxEventBytes bounds one SSE line of the engine's stream and the bytes between two of
	// its events. 0 means 4 MiB.
	MaxEventBytes int
	// MaxStepBytes bounds the text and tool-call arguments of one step, in bytes. 0 means
	// 32 MiB.
	MaxStepBytes int
	// MaxArgumentBytes bounds one tool call's arguments, in bytes. 0 means 16 MiB.
	MaxArgumentBytes int
	// MaxOutputTokens bounds the tokens of one step when the request's max_output_tokens is
	// unset or larger: a step the engine streams past it ends incomplete (max_output_tokens).
	// It is enforced on what the engine streams only, never sent to the engine (which may
	// refuse a bound beyond its context). 0 means sampler.DefaultMaxOutputTokens, negative
	// none (MaxStepBytes still bounds the step).
	MaxOutputTokens int
}

// Model is the chat backend (package doc). Safe for concurrent use.
type Model struct {
	opts    Options
	client  *http.Client
	engines []*engine
	log     *slog.Logger
	fails   failureCounts
	sweeper *fileSweeper // nil without SlotDir or SlotFileTTL

	defaultsMu        sync.Mutex // guards temperature, topP and slotContext
	temperature, topP *float64   // the engine's defaults (Probe); nil when unknown
	slotContext       int        // the smallest context per slot a replica reported (Probe); 0 when none did
}

// New returns the chat backend for opts. It returns an error when opts names no replica.
func New(opts Options) (*Model, error) {
	if len(opts.BaseURLs) == 0 {
		return nil, errors.New("chat: no upstream URL")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.SlotSaveBytes <= 0 {
		opts.SlotSaveBytes = 1 << 30
	}
	m := &Model{opts: opts, client: opts.Client, log: opts.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64 // one connection per concurrent step, kept for the next
		m.client = &http.Client{Transport: tr}
	}
	for _, u := range opts.BaseURLs {
		m.engines = append(m.engines, newEngine(m, u))
	}
	m.startSweeper()
	return m, nil
}

// Pinned returns the number of engine slots held by open rollouts now, over all replicas.
func (m *Model) Pinned() int {
	n := 0
	for _, e := range m.engines {
		if e.slots != nil {
			n += e.slots.inUse()
		}
	}
	return n
}

// Open implements sampler.Model: the rollout is placed on the least loaded healthy replica,
// where all its steps go while that replica serves. No slot is taken until its first step.
func (m *Model) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	s := &session{m: m, id: info.ID, settings: info.Settings, budget: info.Budget}
	if info.Settings.Instructions != "" {
		s.msgs = append(s.msgs, chatwire.Message{Role: protocol.RoleSystem, Content: chatwire.TextContent(info.Settings.Instructions)})
	}
	s.attach(ctx, nil)
	return s, nil
}

// CheckRequest implements sampler.RequestChecker: items a Chat Completions engine cannot take
// are rejected with a 400 naming them. A request that leaves temperature or top_p unset gets
// the engine's defaults (when Probe learnt them), so its Response echoes what ran.
func (m *Model) CheckRequest(p *protocol.CreateParams) error {
	if err := chatwire.CheckItems(p.Input); err != nil {
		return err
	}
	m.fillDefaults(p)
	return nil
}

// authorize sets the upstream API key on req.
func (m *Model) authorize(req *http.Request) {
	if m.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.opts.APIKey)
	}
}

// logf logs an upstream event at warning level.
func (m *Model) logf(msg string, args ...any) { m.log.Warn(msg, args...) }
