// Package responses is the "responses" model backend: it samples from an upstream Responses
// API over WebSocket (OpenAI's WebSocket mode, reference responses-websocket.md, or another
// Tether on its public shape) and implements sampler.Model.
//
// Entry points: New(Options) returns the Model; WebSocketURL derives the upstream's ws(s) URL
// from the -upstream flag; Model.CheckRequest refuses bad "sim.*" metadata before a response
// starts (a sim upstream would refuse it only after); Model.Models lists the upstream's
// models (its GET /v1/models) for this server's GET /v1/models.
//
// # Connections
//
// Each lane of a client connection (sampler.RolloutInfo.ConnID and Lane) gets one upstream
// WebSocket, shared by the sessions of its rollouts (which sample one at a time). It is dialled on the first Prefill
// or Sample, with "Authorization: Bearer KEY" when Options.APIKey is set, and closed when the
// last session of the ConnID closes, or at once when a step is abandoned (cancel, disconnect,
// a failed Output call, a timeout, an upstream failure): the upstream's public shape has no
// response.cancel, so closing the socket is what stops its generation. The next step dials
// again. A reader goroutine per socket reads all the time, also while the rollouts are
// suspended, so the upstream's pings are answered and an idle socket stays alive (Tether
// drops a peer that misses a pong); frames wait in a small buffer for the next step.
//
// Lanes: a client connection's lanes (stream_id) sample concurrently upstream, each on its own
// socket, and a rollout's chain of previous_response_ids stays on its lane's socket. The
// upstream sees default-lane creates only (no stream_id), which every Responses WebSocket
// server accepts.
//
// # Steps
//
// Each rollout is one upstream chain of response.create frames with store:false. The first
// step sends the whole context (instructions, tools, tool_choice, parallel_tool_calls,
// max_output_tokens, max_tool_calls, temperature, top_p, presence_penalty, frequency_penalty,
// text.format, text.verbosity, reasoning.effort, metadata, input); every later step sends the same settings, previous_response_id = the
// upstream Response of the previous step, and only sampler.Step.Input (function_call_output
// items and new messages), so the upstream continues on its hot path and the model items it
// generated are never sent back. Items are sent without their ids and statuses (Tether's item
// ids mean nothing upstream). The upstream's call_ids are kept (sampler.Output.Call); when the
// rollout had to replace one, the function_call_output is sent with the upstream's id.
//
// Upstream events become Output calls: response.output_item.added of a message → Text(""), of
// a function_call → Call(name, call_id); response.output_text.delta → Text;
// response.function_call_arguments.delta → Arguments (a function_call or message whose
// output_item.done carries text or arguments that were not streamed is streamed then). Other
// item types (reasoning) stay upstream: they are kept there on the hot path and lost when the
// context is sent again in full.
//
// The terminal event ends the step: response.completed gives the step's usage as the
// upstream reported it (input_tokens, input_tokens_details.cached_tokens, output_tokens);
// response.incomplete with reason max_output_tokens ends the rollout incomplete (any other
// reason fails the step); response.failed and error frames fail the step with an error naming
// the upstream's status, code and message (the rollout ends failed, server_error).
//
// # Recovery
//
// An error frame websocket_connection_limit_reached (the connection-age limit), a close 1001
// (going away) or a response.incomplete for the upstream's shutdown or connection limit
// before the step streamed anything, a socket that is found dead when a step starts, and
// previous_response_not_found make the step start again, once, on a fresh socket
// (or the same one for previous_response_not_found) with the full context converted to input
// items and no previous_response_id: a store:false previous response does not survive its
// socket. The client sees nothing of it. Any other close, a socket that drops after output
// was streamed, or upstream silence longer than Options.Timeout fails the step. Silence is no
// data received: every piece of a frame that arrives (4 KiB, or the frame's end) counts, so a
// large frame that arrives slowly is waited for as long as its bytes keep coming (the read
// limit and the memory budget bound its size); the upstream's pings do not count.
//
// An error frame with status 401 or 403 fails the step with a fixed message: the upstream's
// may quote the server's key.
//
// # Caveats
//
//   - Abandoning a step closes the connection's socket, so its other suspended rollouts lose
//     their upstream chains and continue with the full context.
//   - cached_tokens is the upstream's figure: after a reconnect it is what the upstream reused
//     of the resent context (0 for another Tether, which rebuilds on its cold path).
//   - Settings the rollout does not see (max_tool_calls' remainder) are sent for the chain as a
//     whole; a chain restarted by recovery gets max_tool_calls minus the calls made so far.
//   - Refusal parts and reasoning items of the upstream are not streamed to the client.
package responses
