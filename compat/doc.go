// Package compat is Tether's public-shape adapter: the OpenAI Responses API
// as its clients know it, served over the shape-neutral core of package session so that a
// continuation resumes the suspended sampler instead of rebuilding the conversation.
//
// Entry points: [ServeWebSocket] runs response.create over a WebSocket;
// [HTTP] serves POST /v1/responses (JSON, or SSE with stream:true), GET and DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items and POST /v1/responses/{id}/cancel.
// Every create goes through the connection's one create pipeline (session.Conn.Create); this
// package is its shape (where segments are kept, how they answer, hot or cold). Stored responses
// (store:true) live in the connection's store (session.Options.Store; [Options.Store] serves the
// GET, DELETE, cancel and input_items routes): a store:true segment is written (session.Conn.Persist) before
// its terminal event is sent, and when the store fails or times out the segment ends
// response.failed with store_unavailable instead (the connection and its segments stay
// usable); store:false segments are never written.
//
// # Segments, hot path, cold path
//
// A response.create starts a rollout (sampler.Rollout with SuspendOnAnswer). Each time the
// rollout suspends — at tool calls, after an answer, or at once for a generate:false warm-up —
// the current public Response (a segment) ends with response.completed; its sequence_number and
// output_index spaces start at 0. The suspended rollout stays in the connection under the
// segment's id.
//
// A later create takes the hot path when previous_response_id names the latest segment of a
// suspended rollout (asked of the rollout: session.Conn.Latest), its input is exactly one function_call_output per pending call_id (any
// order) optionally followed by messages, and model, instructions, tools, tool_choice,
// parallel_tool_calls, reasoning, text, temperature, top_p, max_output_tokens, max_tool_calls,
// truncation and metadata equal the parent's: the rollout resumes and only the new items are
// validated and rendered. Anything else — an older parent (a fork), changed settings, an ended
// or evicted rollout, a parent from the store — takes the cold path: a new rollout whose context
// is rebuilt from the chain's items. Both give the model the same context (the sim's context
// fingerprint proves it); input_tokens_details.cached_tokens and [Counters] show which path ran.
// A cold continuation is logged at debug level with its protocol.Continuation reason (the
// first differing setting for settings_differ) and counted by reason ([Counters.ColdBy]); the
// public events carry no member for it (docs/clients.md, when a continuation goes cold).
//
// # Rules
//
//   - previous_response_id resolves from the connection's ended segments, entries of its one
//     registry (session.Conn.KeepResponse) bounded with its other entries by
//     session.Limits.CacheResponses and CacheBytes (a segment counts as one entry and its
//     items' bytes; the newest entry is always kept; a suspended rollout whose latest
//     segment is evicted ends), then from the store for store:true responses of the same owner (one
//     store.Store.Chain call); else previous_response_not_found and no response.created; a store
//     failure is store_unavailable (503).
//   - A failed continuation — an error frame or response.failed — evicts its parent, unless it
//     came from another lane.
//   - Continuations are checked with protocol.CheckContinuation: tool_call_not_found,
//     duplicate_tool_output, missing_tool_output ("No tool output found for function call
//     <call_id>.").
//   - background:true is served over HTTP only (background.go, [Background]): the response
//     runs on its own connection core detached from the request, GET polls it (with its output
//     as it stands on the instance that runs it: bgoutput.go), GET
//     ?stream=true&starting_after=N replays its kept events and follows it, POST
//     /v1/responses/{id}/cancel cancels it, DELETE removes it with its kept events once it has
//     ended (response_in_progress before, bgrunning.go; a store that fails changes nothing);
//     a create naming it in previous_response_id is response_in_progress while it runs, on
//     every shape ([Background.InProgress], session.Options.InProgress); on a shared store
//     (Background.Shared, bgshared.go) all of these work on every instance; store:false with
//     it is invalid_value, and a WebSocket create with it unsupported_parameter. generate and stream_id are
//     WebSocket-only; response.processed is accepted silently; stream, stream_options, event_id,
//     client_metadata, prompt_cache_key, include and unknown top-level fields are ignored.
//     Unknown tool types are echoed in the Response unchanged.
//   - Creates queue FIFO behind the sampling response of their lane (stream_id; the default
//     lane when absent); responses of one lane never interleave, lanes sample concurrently (see
//     package session). Every event and error of a lane's create carries its stream_id. A
//     continuation from another lane than its parent's (a fork) takes the cold path; a failed
//     fork keeps its parent.
//   - response.steer (steer.go) steers a response in flight on this connection: the rollout
//     takes it and the sink ends the segment response.incomplete (steered) and starts a
//     successor segment on the same rollout; failures are response.steer.failed with the
//     reference's codes, steering_not_supported when the model does not steer.
//   - At the connection age limit an in-flight response may finish within the shutdown grace,
//     queued creates get the websocket_connection_limit_reached error frame, then that frame
//     and close 1001; on server shutdown in-flight responses finish within the grace (else
//     response.incomplete, reason server_shutdown).
//   - HTTP bodies over the frame limit get 413 request_body_too_large.
//
// # Caveats
//
// A create whose previous_response_id names a response that is still running or queued on the
// same connection (pipelined before its terminal event) is not waited for: it is answered
// response_in_progress (409, param previous_response_id), and the parent is not evicted.
package compat
