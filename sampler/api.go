package sampler

import (
	"context"
	"time"

	"github.com/tetherd/tether/protocol"
)

// Settings are the generation settings of a rollout, taken from a create request
// (see SettingsFrom). Zero MaxOutputTokens / MaxToolCalls mean unlimited.
type Settings struct {
	Model             string
	Instructions      string
	Tools             []protocol.Tool
	ToolChoice        protocol.ToolChoice
	ParallelToolCalls bool
	MaxOutputTokens   int // tokens per sampling step (one public Response); 0 = unlimited
	MaxToolCalls      int // per rollout; 0 = unlimited
	Metadata          map[string]string
}

// Ticket is a place in the connection's FIFO sampling queue (architecture §2). The rollout
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

// Suspension describes a suspended rollout.
type Suspension struct {
	PendingCallIDs []string        // call_ids the next Resume must answer, in output order
	Output         []protocol.Item // model items produced since the previous suspension
	Usage          protocol.Usage  // cumulative over the rollout
	StepUsage      protocol.Usage  // of the sampling step that just ended (one public segment)
	Tokens         int             // tokens in the rollout's context buffer
	// Context is every item of the rollout's context in order (history, inputs, model items):
	// the chain for a cold-path rebuild. It shares the rollout's append-only storage:
	// read-only, safe to read from any goroutine.
	Context []protocol.Item
}

// Ending describes how a rollout ended (architecture §4 "How rollouts end").
type Ending struct {
	Status    string                  // protocol.ResponseCompleted | ResponseIncomplete | ResponseFailed
	Reason    string                  // incomplete reason (protocol.Reason…) when Status is incomplete
	Error     *protocol.ResponseError // when Status is failed
	Output    []protocol.Item         // every model item of the rollout, in output_index order
	Usage     protocol.Usage          // cumulative
	StepUsage protocol.Usage          // of the last sampling step (zero if it ended suspended)
	Sampling  bool                    // the rollout was sampling (held its ticket) when it ended
	Tokens    int                     // tokens in the rollout's context buffer
	// Context is every item of the rollout's context in order, including Output (read-only).
	Context []protocol.Item
	// Err is why the rollout stopped when nobody can be told: the cause of Start's ctx (client
	// disconnect) or the Sink's Event error; then Status is incomplete, Reason cancelled, and
	// the sink should drop the ending. For a failed rollout it is the model's error.
	Err error
}

// Resume is the input that continues a suspended rollout.
type Resume struct {
	Input  []protocol.Item // one function_call_output per pending call, then optional messages
	Ticket Ticket          // the sampling slot to wait for before sampling again (nil: none)
}

// Config starts a rollout (see Start). Model and Sink are required.
type Config struct {
	ID       string // the Response id ("resp_…"), used for item ids' uniqueness only
	Model    Model
	Settings Settings
	// History is rendered first and counted as not cached (cold path); Input follows it.
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
	// StartSuspended renders History+Input and, once it holds Ticket, suspends without
	// sampling (warm-up).
	StartSuspended bool
}

// Model is the seam between the rollout loop and an engine (architecture §5); Sim is the
// default backend. Sample runs one sampling step of req (req and req.Context are read-only and
// must not be retained), streams what it generates through out, and returns when the step is
// done: tool calls (the rollout suspends) or an answer. It returns an error when the engine
// fails (the rollout ends failed, code server_error), and must return promptly when ctx ends
// or an Output method fails (cancel, disconnect, consumer gone). It runs on the rollout's
// goroutine; one Model value may serve many rollouts concurrently.
type Model interface {
	Sample(ctx context.Context, req *Request, out Output) (StepResult, error)
}
