// Package bench is `tether bench`: one agent workload through four
// transports in one run, and where each one's per-turn overhead goes.
//
// The bench is a client. It speaks raw JSON over github.com/coder/websocket and net/http, and
// imports no server package: only sampler (the sim's cost model, and the tokenizer for the
// floor), protocol (the item type the tokenizer takes) and internal/chatwire (the Chat Completions wire
// types of the engine transport). `tether bench` spawns `tether serve`
// as a child process ([Spawn]) so that it can read the server's CPU time from /proc; [Run]
// itself only needs a base URL, which is how the tests drive an in-process server.
//
// # Workload
//
// R rollouts × K tool calls per transport (defaults 3 × 200: about a minute on 2 cores). A
// rollout is one user message, one shell-like function tool (exec_command with a required
// "cmd") and metadata {"sim.calls": K, "sim.speed": "instant"}: the sim calls the tool K times
// in a row and then answers, so a rollout has K+1 turns. Each tool output is ToolOutputBytes of text that looks
// like a command's output (default 2 KiB, about 500 tokens: the history reaches about 100k
// tokens at turn 201). Outputs depend only on the rollout and call numbers, so every transport
// sends the same tool outputs. Before the measured rollouts each transport runs one short
// warm-up rollout that is discarded; the measured rollouts are interleaved across transports.
//
// # Transports
//
//   - http: POST /v1/responses, stream:true (SSE), store:false, the whole history as input on
//     every turn (what a stateless client does). The server parses, validates and renders the
//     whole history every turn, and the model prefills it again.
//   - http-prev: POST with previous_response_id and store:true, input = the new tool output.
//     Each request is a new connection core on the server, so the chain is rebuilt from the
//     Store (the cold path): less to send, as much to render and prefill as http.
//   - ws: the public shape over one WebSocket, response.create with previous_response_id:
//     the hot path resumes the suspended rollout, rendering only the new item.
//   - append: the append shape (OpenAI-Beta: responses_append=v1): one response.create, then a
//     response.append per turn at each response.done.
//
// # Measurements
//
// Overhead of a turn: the client's clock from just before the first byte of the request (the
// POST, or the WebSocket frame) is written to the moment that turn's first
// response.output_item.added has been read, with the sim at instant speed (so it holds no model
// time). Bytes: what the client wrote on its connections during the turn (HTTP headers and
// body; WebSocket frame headers, masks and payload). Server CPU: utime+stime of the server
// process from /proc/<pid>/stat (clock ticks of 10ms) between the ends of two consecutive
// turns; per turn that is coarse, so the table shows the transport's total divided by its turns.
//
// The floor of a turn, measured in the same run right after the turn: the time to write the
// turn's exact frame (or POST body) on a raw loopback WebSocket to an in-process echo server and
// read all of it back, plus one tokenization (sim.RenderItems) of the turn's new input.
// Both parts are reported. A server cannot do a turn for less: the bytes must cross the socket
// and the new input must be tokenized. A turn's own cost is its overhead minus the floor
// measured right after it: what the server and the client library add to the unavoidable
// work, in absolute time (the table's "own cost p50" column is the median over turns).
//
// Growth ratio: for each turn index take the fastest of the R rollouts (the one least
// disturbed by other work on a shared machine: a cost that recurs at the same turn in every
// rollout, such as a GC cycle at a given heap size, stays in it), then divide the median of the
// last w turns by the median of the first w turns, with w one in twenty turns (at least 3; 10
// for 201 turns). The chart plots the same per-turn values. With R = 1 both are the raw turns.
// overhead_ms p50/p90 and the per_turn samples keep every rollout.
//
// End-to-end time at the 65, 1000 and 4000 tokens/s presets is derived, not slept: per turn,
// the measured overhead plus sampler's CostModel.Duration(prefill, output tokens) of that
// preset, summed over the rollout (mean over rollouts). "As served" takes prefill =
// input_tokens − cached_tokens from the turn's usage (for the append shape, the difference of
// the cumulative usage of consecutive response.done events). "Prefix cache" gives every
// transport a perfect prefix cache instead, prefill = the tokens of the new input (what the
// floor tokenized), leaving only the transport's own cost. TTFT is the median over turns of
// overhead + the preset's time to first token + prefill time. With Config.Realtime the sim runs
// at one preset in real time (a live demo; the server's sim must sleep, as tether serve's
// does): the rollout time is measured instead, and the events/s measurements are skipped
// unless asked for.
//
// Events/s: one append-shape rollout streaming an answer of StreamTokens tokens
// (sim.answer_tokens, about one output_text.delta per token) at instant speed, counting every
// event from the create written to the terminal event read; and Concurrent such rollouts of
// ConcurrentTokens each on as many connections, started together (aggregate events over the
// wall time of the slowest).
//
// # Engine mode
//
// When the server's model is not the sim (its GET /v1/models does not list "sim", or
// Config.Model names another model), or Config.Engine is set, the bench measures a real
// engine. A real model does not call tools on request, so the workload does not rely on calls:
// every rollout has exactly K+1 turns (defaults 3 × 4, tool output 256 B, to fit a small
// context); a turn that ended at complete tool calls is answered with their outputs, any other
// turn (an answer, or output cut off at max_output_tokens) is followed by a user message of
// the same size on the same chain: the whole history (http), previous_response_id (http-prev,
// ws), response.append while the rollout is suspended and else a new response.create with
// previous_response_id (append). A call cut off before it was complete is never answered.
// Every request sets max_output_tokens (Config.MaxOutputTokens, default 32) and temperature 0,
// and no sim metadata; a turn that ends incomplete for another reason (the context is full)
// stops the run. The events/s and turns/s measurements (which drive the sim) are skipped, and
// so is the floor.
//
// With Config.Engine (the engine's /v1 base) a fifth transport, engine, runs first and is the
// baseline of the ratios: the bench itself POSTs the growing message list to the engine's
// /chat/completions with stream:true and stream_options.include_usage, the same tool (in
// Chat Completions form), max_tokens and temperature 0, and keeps the assistant messages, tool
// messages and follow-ups as an agent without Tether does. It names no slot.
//
// Times are measured: first output is the request written → the first output item (Tether)
// or the first content or tool-call chunk (engine); turn_ms → the turn's last event; rollout_s
// their sum per rollout. Token counts are the engine's own: usage.prompt_tokens and
// prompt_tokens_details.cached_tokens (else llama.cpp's timings.cache_n) on the engine
// transport; Tether's usage, which passes the engine's figures through, on the others.
//
// # JSON report (-json)
//
// All durations are in milliseconds unless the key ends in _s (seconds) or _us (microseconds).
//
//	version                 layout version (1)
//	command                 the command line, when the caller set it
//	started_at, elapsed_s   when the run started (RFC 3339, UTC) and how long it took
//	mode                    "instant" (derived end-to-end times), "realtime" or "engine"
//	realtime_speed          the preset of a realtime run
//	machine                 goos, goarch, cpus, go_version
//	server                  url; spawned (the bench started it); pid and cpu_measured (CPU
//	                        read from /proc); clock_ticks_per_s (100); engine (the engine
//	                        transport's /v1 base)
//	workload                rollouts, calls, turns (calls+1), tool_output_bytes, warmup_calls,
//	                        history_tokens_end (input_tokens of the last turn), model,
//	                        max_output_tokens (engine mode)
//	transports[]            one object per transport, in the order engine, http, http-prev,
//	                        ws, append:
//	  name
//	  turns                 measured turns (rollouts × turns)
//	  overhead_ms           {p50, p90, mean, min, max} over every measured turn
//	  overhead_ratio_vs_http  overhead_ms.p50 / the baseline's (engine when it ran, else http)
//	  floor_ms, floor_echo_ms, floor_tokenize_ms   stats of the floor and of its two parts
//	  overhead_vs_floor     overhead_ms.p50 / floor_ms.p50
//	  own_cost_ms           stats of overhead_ms − floor_ms per turn: the transport's own cost
//	  bytes_per_turn        mean bytes the client wrote per turn (wire bytes)
//	  frame_bytes_per_turn  mean size of the request body or frame payload
//	  server_cpu_ms_per_turn  server CPU over the transport's rollouts / turns; -1 unknown
//	  growth                {window_turns, first_ms, last_ms, ratio}
//	  e2e                   keyed by preset ("65", "1000", "4000"; or the realtime preset):
//	                        {measured, rollout_s, overhead_s, model_s, ratio_vs_http,
//	                        prefix_cached_rollout_s, prefix_cached_ratio_vs_http, ttft_p50_ms,
//	                        ttft_ratio_vs_http, prefix_cached_ttft_p50_ms,
//	                        prefix_cached_ttft_ratio_vs_http}
//	  per_turn[]            one object per measured turn: rollout, turn, overhead_ms, turn_ms
//	                        (to the turn's last event), floor_ms, floor_echo_ms,
//	                        floor_tokenize_ms, frame_bytes, bytes_sent, server_cpu_ms (-1
//	                        unknown), input_tokens, cached_tokens, prefill_tokens,
//	                        output_tokens, new_input_tokens, events, tool_calls (engine mode:
//	                        the calls the turn ended at)
//	  turn_ms               engine mode: {p50, p90, mean, min, max} of the turn times
//	  rollout_s, rollout_ratio  engine mode: Σ turn_ms per rollout (mean), and / the baseline's
//	  input_tokens_per_turn, prefill_tokens_per_turn, cached_tokens_per_turn  engine mode: means
//	  cached_fraction       engine mode: Σ cached_tokens / Σ input_tokens
//	  tool_call_turns       engine mode: turns that ended at tool calls
//	events.single, events.concurrent   {rollouts, answer_tokens, events, seconds, events_per_s,
//	                        server_cpu_s (-1 unknown), server_cpu_us_per_event}; null if skipped
//
// Ratios are 0 when the baseline did not run.
//
// # Decisions
//
//   - The overhead clock stops at the first response.output_item.added, not at the end of the
//     turn: at a real model speed the rest of the turn's events are paced by decoding.
//   - The client reads frames without decoding those it does not need (the event type is read
//     from the frame's prefix), so the client's own cost stays small next to the server's.
//   - WebSocket rollouts each open their own connection; the dial is not part of any turn.
//     HTTP transports keep their keep-alive connection across turns and rollouts.
//   - Every request carries metadata sim.speed, so a server started at another default speed
//     (-url) still runs the bench's workload at instant speed.
//   - Config.OnTurn hands each turn's sample to the caller as soon as it is measured, and Merge
//     combines the reports of runs over different transports: tether serve -ui (package
//     internal/ui) races one Run per transport at the same time and streams their turns.
package bench
