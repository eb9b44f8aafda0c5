// Package sampler runs agent rollouts: the Rollout run loop with suspend / resume / cancel,
// the Model seam that engines plug into, and usage accounting. It knows
// nothing of WebSockets, HTTP or connections: the session package drives it through Start,
// Resume and Cancel, and hears back through a Sink. It knows nothing of tokens either: each
// backend owns its tokenizer and rendering (package sampler/sim renders o200k_base for the
// default "sim" model; packages sampler/chat and sampler/responses drive upstream engines).
//
// Entry points:
//
//   - Start(ctx, Config) *Rollout starts a rollout's goroutine; Rollout.Resume continues it at
//     a suspension, Rollout.Cancel ends it, Rollout.Wait / Done wait for its goroutine.
//   - CheckOutputs validates the input of a continuation; SettingsFrom takes the generation
//     settings from a create request; CheckRequest runs a backend's own validation.
//   - Model, ModelSession, Step, Output and StepResult are the seam (see "The Model seam").
//
// # The rollout loop
//
// One goroutine owns a rollout's state (the Context, the model items, usage, the ticket): Run,
// started by the rollout's owner after New (Start does both, for owners that do not count
// their goroutines). The rollout's phase (State: Queued, Sampling, Suspended, Resuming, Ended)
// lives here only; owners ask Rollout.State, and a Sink that implements StateObserver hears of
// every change in order. A Sink may wrap another (Wrapper, as the connection core's wraps a
// shape's): the rollout finds the optional interfaces down the chain once, so the wrapper
// declares only the calls it adds to. It
// loops: wait for the Ticket (the lane's FIFO sampling slot), call Sink.Started the first
// time, run one sampling step (ModelSession.Sample, its output streamed to the Sink as events), then
// either end (Sink.Ended: completed, or incomplete / failed) or suspend at the step's tool
// calls (Sink.Suspended) and block in a select on its inbox (Resume), Cancel, its context and
// the suspend timer. The ticket is released right after Sink.Suspended / Sink.Ended return, so
// that a rollout's last event is written before the next rollout's first. Resume validates the
// input with CheckOutputs against the pending calls (the rollout stays suspended when it is
// refused), appends it to the context and samples again once the new ticket is held; the
// backend receives only the new items. Every step of a rollout with N sequential tool calls is its own
// suspension. With Config.SuspendOnAnswer an answer suspends with no pending calls (the public
// shape keeps the rollout for the next user turn); with Config.StartSuspended the rollout
// waits for its ticket (FIFO order), hands its context to ModelSession.Prefill and suspends
// without sampling (a warm-up).
//
// # Parking
//
// A suspended rollout can park (Rollout.Park, or Config.ParkAfter): its goroutine ends and its
// whole state becomes one ParkedRollout value, handed to the Sink's ParkSink instead of Ended:
// settings, the context, the model items, pending call ids, usage, and the backend's session
// state in the form it resumes from (ParkableSession.Park; the sim's rendered tokens).
// Unpark continues it in a new Rollout, Suspended, whose next Resume is hot: the backend
// reopens its session from that state (Unparker) instead of taking the context in again. Park
// runs on the rollout's goroutine, so a Resume, a Cancel or the suspend timer that races it
// either wins (the rollout stays live) or finds it parked (Resume: ErrParked). Rollouts of a
// Model without Unparker, or whose Sink has no ParkSink, stay live. A rollout that ends
// without reopening its parked session (cancelled, timed out, its connection closed) hands
// the state to the Model's ParkedDropper, if it has one, to release what it holds outside.
//
// # Steering
//
// Rollout.Steer (for models that implement Steerable) hands user input to the
// rollout: a sampling step's context is cut short (its open item ends incomplete), the Sink's
// SteerSink hears SteerAccepted then Steered (the response ends, a successor samples on with the
// input appended, holding the same ticket); a steer for a rollout waiting for its ticket joins
// the next step; one that finds the step ended at complete tool calls is held (SteerPending after
// Suspended) and its input follows the next Resume's outputs. At most MaxPendingSteers wait.
//
// # What other goroutines may do to a rollout
//
// Only the rollout's goroutine changes its state; other goroutines reach it in four ways, each
// of which the loop takes in at a point of its own choosing:
//
//   - Resume is a message with a reply: the suspended loop takes it from its inbox, checks it
//     and answers, so the caller learns at once whether the input was accepted.
//   - Cancel and the owner's context end the loop through its context, which the model's step
//     sees as well.
//   - Steer appends to a mailbox (a slice under its own mutex, bounded by MaxPendingSteers)
//     and cuts the running step's context. It cannot be a message with a reply: the loop is
//     inside the model's step, maybe for seconds, while the caller must know at once whether
//     the steer was taken (ErrTooManySteers, ErrEnded, ErrParked).
//   - KeepAlive is the one call that runs a Sink method off the loop: during a long step the
//     loop is blocked in the model and cannot send anything itself. Every Sink call holds one
//     mutex, so the keepalive's event is ordered with the step's own events (sequence_number
//     stays gapless), and KeepAlive only tries that mutex, so it never waits for an event
//     being written.
//
// Park is a request the loop acts on while suspended (a wake-up channel); the suspend timer
// and the park timer are the loop's own.
//
// Events: for a message, output_item.added (status in_progress, content []),
// content_part.added (empty output_text), output_text.delta…, output_text.done,
// content_part.done, output_item.done (status completed); for a call, output_item.added
// (arguments "", status in_progress), function_call_arguments.delta…,
// function_call_arguments.done (name, arguments), output_item.done. OutputIndex counts the
// rollout's model items from 0 over the whole rollout. Item ids are "msg_" / "fc_" and call ids
// "call_" followed by 32 hex digits.
//
// How a rollout ends (Ending.Status / Reason): an answer → completed; Cancel(reason) →
// incomplete with that reason (a sampling rollout stops at once and its open item is closed
// with status incomplete); the suspend timer → incomplete, idle_timeout; max_output_tokens
// reached in a step → incomplete, max_output_tokens; a model error → failed with error
// {code: server_error, message} (or the code and message of a *protocol.Error the backend
// returned, e.g. sampler/chat's invalid_prompt for an upstream 400); a step whose output does
// not fit in Config.Budget → failed, server_error, a *MemoryError's message (see "Memory");
// Start's ctx ending
// (client disconnect) or the Sink's Event failing → incomplete, cancelled, with Ending.Err set
// and no further events: the sink drops it.
//
// # The Model seam
//
// A backend is opened per rollout (Model.Open, on first use), fed and sampled step by step
// (ModelSession.Sample), and closed exactly once when the rollout ends for any reason
// (ModelSession.Close): completed, cancelled, evicted, timed out, connection lost, server
// shutdown. Each Step carries only what is new to the engine: Step.Output, the model's own
// items of the previous step (with the ids and call_ids the client saw), and Step.Input, the
// chain and input at the first step, the continuation's input after each suspension.
// Step.Context has everything, for backends that need it. A backend may keep the engine's
// call_id (Output.Call); otherwise the rollout assigns one.
//
// The backend, not the loop, reports usage: StepResult.InputTokens, CachedTokens and
// OutputTokens are what the engine said it processed, reused and generated; 0 where it does
// not say. A panic in Open, Prefill, Sample or Close ends only that rollout (failed,
// server_error; Ending.Err is a *PanicError with the stack, which the session logs).
// Optional interfaces: RequestChecker validates create requests before a rollout starts
// (the sim checks its "sim.*" metadata), Lister lists the model ids for GET /v1/models.
//
// # Memory
//
// A step's output lives in the rollout's items as it accrues, whatever the backend: the
// rollout counts it in Config.Budget (the server's -max-memory budget) in one place, its
// Output. Each Text and Arguments delta is counted at AccrueFactor bytes a byte (the text and
// its builder's room to grow) before it is taken, reserved in AccrueChunk units, so that the
// shared counter is touched once per 8 KiB of output, not per delta; the step's reservation is
// given back when it ends, when its items become the rollout's and its Sink counts them
// (Suspension.Output, Ending.Context). A step's first chunk is counted whether it fits or not
// (Budget.Grow): a step that produces little is not failed for what others hold. A later
// chunk that does not fit (after the server has tried to make room: the session parks
// suspended rollouts) refuses its delta with a *MemoryError, and everything after it; the
// step then fails (failed, server_error,
// "The model failed to generate a response: the server's memory budget (-max-memory) is in
// use: …"), whatever the backend returns, its open item closed incomplete. Nothing waits for
// room. A backend counts what else it holds of a step in the same Budget (RolloutInfo.Budget):
// an upstream's event or frame being read (MeteredReader), a value built before it is
// streamed (the sim's synthesised values).
//
// # Usage
//
// Per step: input_tokens, cached_tokens and output_tokens as the backend reported them
// (StepResult); cached_tokens never exceeds input_tokens. A rollout's usage is the sum over
// its steps. Suspension.Usage and Ending.Usage are cumulative, StepUsage is the last step's.
//
// # Caveats
//
//   - max_tool_calls counts the rollout's calls, so a cold-path rebuild (a new rollout) starts
//     counting again.
//   - Sink.Event receives a reused Event: it and the Item/Part it points to are valid only
//     during the call.
package sampler
