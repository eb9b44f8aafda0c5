package sampler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tetherd/tether/protocol"
)

// Settings are the generation settings of a rollout, taken from a create request
// (see SettingsFrom) and fixed for the rollout's life: what reaches the backend. The public
// shape's hot path requires a continuation's settings to equal its parent's (compat's
// settingsKey compares these and a few response-only fields). Zero MaxOutputTokens /
// MaxToolCalls mean unlimited; nil Temperature / TopP / PresencePenalty / FrequencyPenalty and
// empty ReasoningEffort / Verbosity mean the engine's default; nil TextFormat means plain text.
type Settings struct {
	Model             string
	Instructions      string
	Tools             []protocol.Tool
	ToolChoice        protocol.ToolChoice
	ParallelToolCalls bool
	MaxOutputTokens   int // tokens per sampling step (one public Response); 0 = unlimited
	MaxToolCalls      int // per rollout; 0 = unlimited
	Temperature       *float64
	TopP              *float64
	PresencePenalty   *float64 // -2…2; nil = the engine's default
	FrequencyPenalty  *float64 // -2…2; nil = the engine's default
	// TextFormat is text.format as the client sent it: {"type":"text"}, {"type":"json_object"}
	// or {"type":"json_schema","name":…,"schema":…,"strict":…}. Nil means text.
	TextFormat      json.RawMessage
	ReasoningEffort string // reasoning.effort: none, minimal, low, medium, high, xhigh; "" = default
	Verbosity       string // text.verbosity: low, medium, high; "" = the engine's default
	Metadata        map[string]string
}

// Ticket is a place in the connection's FIFO sampling queue. The rollout
// calls Wait before it samples and Release when it stops sampling: right after Sink.Suspended
// or Sink.Ended has returned, so that this rollout's last event is written before the next
// rollout's first. A rollout that ends while waiting releases its ticket too.
// Wait returns ctx.Err() if ctx ends first; Release is idempotent.
type Ticket interface {
	Wait(ctx context.Context) error
	Release()
}

// Sink receives a rollout's happenings, in order, from the rollout goroutine. Implementations
// (the shape adapters) assign sequence_number and translate to wire events. Errors returned by
// Event mean the consumer is gone: the rollout stops sampling and ends (no further Event).
// The order is: Started? (Event* (Suspended | Ended))* … Ended, with Started before the first
// Event; a warm-up (Config.StartSuspended) calls Suspended before Started, and a rollout
// cancelled while queued calls Ended without Started.
type Sink interface {
	// Started is called once, when the rollout first holds its ticket (before any Event).
	Started()
	// Event delivers an output event (output_item.added/.done, content_part.*, *.delta, *.done).
	// OutputIndex counts the rollout's output items from 0; SequenceNumber is left 0.
	// The rollout reuses ev and the Item and Part it points to: they are valid only during
	// the call, so encode or copy them before returning.
	Event(ev *protocol.Event) error
	// Suspended is called when the rollout stops at tool calls (or, with Config.SuspendOnAnswer,
	// after an answer or a warm-up) and waits for Resume. The ticket is released right after
	// Suspended returns.
	Suspended(s Suspension)
	// Ended is called exactly once, last, whatever the cause (also on disconnect).
	Ended(e Ending)
}

// Wrapper is an optional interface of a Sink that wraps another, as the connection core's
// sink wraps a wire shape's: Unwrap returns the wrapped Sink. A rollout looks for its Sink's
// optional interfaces (KeepAliver, SteerSink, ParkSink, StateObserver) once, when it is made,
// on the Sink and then down the Sinks it wraps: the first that has one takes its calls, so a
// wrapper declares only the methods it has work in. Notifications go to every Sink of the
// chain that has them, outermost first: StateChanged, and Steered (a wrapper that declares
// Steered without being a SteerSink hears the steered responses the SteerSink answers; it
// must not forward them).
type Wrapper interface {
	Unwrap() Sink
}

// hooks are the optional interfaces of a rollout's Sink and the Sinks it wraps (Wrapper),
// found once by New.
type hooks struct {
	keep    KeepAliver
	steer   SteerSink // nil: the rollout takes no steers
	park    ParkSink
	state   []StateObserver
	steered []steeredObserver
}

// steeredObserver is a Sink of the chain that hears Steered (a SteerSink, or a wrapper).
type steeredObserver interface{ Steered(st Steering) }

// findHooks walks s and the Sinks it wraps, outermost first.
func findHooks(s Sink) hooks {
	var h hooks
	for s != nil {
		if v, ok := s.(KeepAliver); ok && h.keep == nil {
			h.keep = v
		}
		if v, ok := s.(SteerSink); ok && h.steer == nil {
			h.steer = v
		}
		if v, ok := s.(ParkSink); ok && h.park == nil {
			h.park = v
		}
		if v, ok := s.(StateObserver); ok {
			h.state = append(h.state, v)
		}
		if v, ok := s.(steeredObserver); ok {
			h.steered = append(h.steered, v)
		}
		w, ok := s.(Wrapper)
		if !ok {
			break
		}
		s = w.Unwrap()
	}
	return h
}

// KeepAliver is an optional interface of a Sink: KeepAlive sends an application-level frame
// that tells the client the response is still in flight (the shapes send a repeated
// response.in_progress) and reports whether it sent one. It is called by Rollout.KeepAlive,
// never concurrently with the Sink's other methods.
type KeepAliver interface {
	KeepAlive() bool
}

// Suspension describes a suspended rollout.
type Suspension struct {
	PendingCallIDs []string        // call_ids the next Resume must answer, in output order
	Output         []protocol.Item // model items produced since the previous suspension
	Usage          protocol.Usage  // cumulative over the rollout
	StepUsage      protocol.Usage  // of the sampling step that just ended (one public segment)
	// Context is every item of the rollout's context in order (history, inputs, model items):
	// the chain for a cold-path rebuild. It shares the rollout's append-only storage:
	// read-only, safe to read from any goroutine.
	Context []protocol.Item
	// StateBytes is what the model session holds besides the items, in bytes
	// (StateSizer.StateBytes; 0 when the session does not report it).
	StateBytes int64
}

// Ending describes how a rollout ended.
type Ending struct {
	Status    string                  // protocol.ResponseCompleted | ResponseIncomplete | ResponseFailed
	Reason    string                  // incomplete reason (protocol.Reason…) when Status is incomplete
	Error     *protocol.ResponseError // when Status is failed
	Output    []protocol.Item         // every model item of the rollout, in output_index order
	Usage     protocol.Usage          // cumulative
	StepUsage protocol.Usage          // of the last sampling step (zero if it ended suspended)
	Sampling  bool                    // the rollout was sampling (held its ticket) when it ended
	// Context is every item of the rollout's context in order, including Output (read-only).
	Context []protocol.Item
	// Err is why the rollout stopped when nobody can be told: the cause of Start's ctx (client
	// disconnect) or the Sink's Event error; then Status is incomplete, Reason cancelled, and
	// the sink should drop the ending. For a failed rollout it is the model's error (a
	// *PanicError when the backend panicked).
	Err error
}

// Resume is the input that continues a suspended rollout.
type Resume struct {
	Input  []protocol.Item // one function_call_output per pending call, then optional messages
	Ticket Ticket          // the sampling slot to wait for before sampling again (nil: none)
}

// Config starts a rollout (see Start). Model and Sink are required.
type Config struct {
	ID       string // the Response id ("resp_…"), passed to the backend (RolloutInfo.ID)
	ConnID   string // the client connection's id, passed to the backend (RolloutInfo.ConnID)
	Lane     string // the rollout's lane (stream_id), passed to the backend (RolloutInfo.Lane)
	Model    Model
	Settings Settings
	// History is the chain of a continuation on the cold path; Input follows it. Both are the
	// first step's Step.Input.
	History []protocol.Item
	Input   []protocol.Item
	// Ticket is the first sampling slot (also waited for by a warm-up before it suspends);
	// nil means no queue.
	Ticket Ticket
	Sink   Sink
	// SuspendTimeout ends a rollout suspended longer than this (incomplete, idle_timeout);
	// 0 means never.
	SuspendTimeout time.Duration
	// SuspendOnAnswer makes a final answer suspend with no pending calls instead of ending
	// (the public shape keeps the rollout for the next user turn).
	SuspendOnAnswer bool
	// StartSuspended prefills History+Input (ModelSession.Prefill) once it holds Ticket and
	// suspends without sampling (warm-up).
	StartSuspended bool
	// ParkAfter parks the rollout once it has been suspended this long, when it can park (see
	// Park); 0 means only Park parks it.
	ParkAfter time.Duration
	// Budget is the server-wide memory bound; nil means none. The rollout counts in it the
	// text and arguments each sampling step accrues, AccrueFactor bytes per byte reserved in
	// AccrueChunks before a delta is taken, until the step ends (its items are then the Sink's
	// to count: Suspension.Output, Ending.Context); a delta that does not fit fails the step
	// (failed, server_error, a *MemoryError's message) and releases what it held. It is
	// passed on to the backend (RolloutInfo.Budget) for what else it holds of a step.
	Budget Budget
}
