// Package soak is Tether's soak test: a load program that holds N WebSocket
// connections running M-turn agent rollouts in both shapes for a set duration, disrupts them,
// verifies every rollout that ends, and checks that the server's goroutines and memory come
// back afterwards. `tether soak` runs it; TestSoak runs a 20-second version in CI.
//
// It is a client: raw JSON frames over github.com/coder/websocket. It imports internal/server
// only to start an in-process server when Config.URL is empty.
//
// # Load
//
// Connections alternate between the append shape (OpenAI-Beta: responses_append=v1) and the
// public shape. Each runs rollouts one after another: a response.create with one function
// tool and metadata {"sim.calls":"M"} and store:false, then M continuations (append:
// response.append after each response.done; public: response.create with
// previous_response_id and the function_call_output), then the sim's answer. A rollout picks
// at most one disruption (Config.Rates):
//
//   - disconnect: the client drops the connection while the rollout is suspended or while the
//     server streams (after 1–4 frames of a step), abruptly or with a normal close, then
//     reconnects;
//   - cancel (append shape): response.cancel while suspended, or right after an append (a race
//     with the step: the rollout ends incomplete "cancelled", or completes and the cancel is
//     answered response_already_completed);
//   - slow reader: the rollout asks for a big answer (sim.answer_tokens) and the client stops
//     reading for SlowPause while it streams;
//   - stalled reader: the same for StallPause, longer than the server's write timeout: the
//     server must drop the connection (in-process by default; against a URL only with
//     StallPause set).
//
// With Config.Lanes (-lanes N) each connection carries N named lanes (stream_id), each with
// its own worker and rollouts at the same time; one reader per socket routes frames by
// stream_id (lanes.go), every event must carry its rollout's lane, and the verification below
// holds per lane. Bad frames and slow or stalled readers, which belong to the whole socket, are
// off; a disconnect aborts every lane of the socket.
//
// On top, per turn: bad frames (truncated JSON, unknown or missing type, fields of the wrong
// type, binary frames, ids that do not exist), sent while the rollout is suspended (the next
// frame must be their error) or while the server streams; and, on the append shape, rejected
// appends (unknown or already answered call_id, no output, two outputs, a message first, a
// wrong item type) after which the rollout must still be suspended with the same calls. Every
// bad frame must be answered by exactly one error frame with the documented code, in order.
// Capacity refusals (rollout_limit_reached, websocket_queue_limit_reached, a 503 upgrade) are
// counted, not failures.
//
// # Verification
//
// For every rollout that completes or is cancelled: sequence_number runs 0, 1, 2 … without
// gaps or repeats (one space per append rollout, one per public segment); every
// output_item.added has its output_item.done, output_index counts from 0; each response.done's
// output and pending_call_ids are exactly the items streamed since the last suspension; the
// terminal Response's output is exactly the output_item.done items, equal and in order; every
// call_id is unique; every call got exactly one output; usage is cumulative and consistent;
// public segments echo previous_response_id; and the answer quotes the user text and every
// tool output the client sent (each cut to 64 characters), in order, each once, ending with
// the last one, and nothing else (a rejected append's text must not leak in). A cancelled
// answer's complete quote lines must be a prefix of that list. Missing items count as lost,
// repeated ones as duplicated; anything else is a violation, reported with the connection's
// recent frames.
//
// # Resources
//
// "cold" is read when the server is up, "before" after a warm-up (calm rollouts of each shape,
// each bad frame once, then the same load for Config.Warmup, by default as long as the soak):
// the Go runtime keeps span and GC metadata sized by the peak heap, and the pages of code it
// touched, so "before" is the server warm at this load and "after" shows what the soak left
// behind. The report gives "cold" too, and the runtime's memory classes (runtime/metrics)
// that grew between "before" and "after". "peak" is the
// maximum of readings every 200 ms. "after" is read once the server reports no connection
// and no rollout, and goroutines and RSS are within Config.Tolerance (10%) of "before",
// waiting up to Config.Settle. In-process the figures are this process's (server and client:
// runtime.NumGoroutine, VmRSS of /proc/self/status, HeapAlloc), settled readings after
// runtime.GC and debug.FreeOSMemory; against a URL they come from the server's /metrics
// (go_goroutines, process_resident_memory_bytes, go_memstats_heap_alloc_bytes) or
// /proc/PID/status with Config.PID, and the server returns memory to the OS at its runtime's
// pace.
//
// Bytes per suspended rollout: K append rollouts (Config.Suspended) are held suspended at
// their first tool call, 50 per connection; the heap (after GC) and RSS deltas over the same
// connections without rollouts, divided by K. RSS includes each rollout's goroutine stack.
//
// A Report passes when at least one rollout was verified, no item or event was lost or
// duplicated, every bad frame was answered, there was no violation, and the resources came
// back.
package soak
