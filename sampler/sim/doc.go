// Package sim is Tether's default model backend: a deterministic simulation with no weights,
// whose output is a pure function of the context's text and the settings.
// It implements sampler.Model: each rollout gets a session that renders the rollout's items
// into o200k_base tokens, appending only new items to a per-rollout token buffer, and reports
// usage from that buffer: cached_tokens is what the session already held (the previous steps'
// context and output, or a warm-up's prefill), so a hot continuation reports everything but
// its new input as cached and a cold-path rebuild reports 0.
//
// Entry points: NewSim(SimOptions) is the backend; ParseSpeed, Speed.Cost and
// CostModel.Duration give its timing; Fingerprint computes the context fingerprint its answers
// end with; CheckMetadata validates its "sim.*" metadata (Sim.CheckRequest); NewContext /
// Context.Append and RenderItems render items to tokens.
//
// # Rendering
//
// Each item is rendered on its own, so the render of a context is the concatenation of its
// items' renders and a rollout's token buffer only ever appends:
//
//	[TokenStart, header tokens…, TokenSep, body tokens…, TokenEnd]
//
// The special tokens are inserted by this package, never encoded from text: TokenStart
// (<|im_start|>) = 200264, TokenEnd (<|im_end|>) = 200265, TokenSep (<|im_sep|>) = 200266. The
// header of a message is its role, of a function_call "assistant" (body: name, a space,
// arguments), of a function_call_output "tool" (body: its output), of any other item its type
// (body: the strings of its raw JSON under text-like keys). Non-empty instructions are rendered
// first as a "system" item. Ids and call_ids are never rendered. Tool definitions are not
// rendered.
//
// The tokenizer's split pattern is quadratic in the length of a whitespace run (128 KB of
// " \n" took 6.6 s in one piece). Texts are therefore encoded in chunks: a chunk ends after
// 64 bytes of a whitespace run, and at most 2048 bytes long (cut at the last word start, or at
// a character boundary). The cut points depend on the text only, so rendering stays a pure
// function of it; the 128 KB run now renders in tens of milliseconds
// (BenchmarkRenderWhitespace, FuzzRender).
//
// Within a chunk, the tokens of short segments (text between points where the tokenizer's split
// pattern always cuts: after a word before a non-letter, after a number, after a newline, between
// punctuation and a digit) are kept in a process-wide table of 64Ki slots, so recurring words
// and the sim's own arguments skip the tokenizer; a chunk's tokens are the same either way
// (FuzzSegments). A slot is one 64-byte cache line holding a segment of up to 32 bytes and its
// up to 6 tokens, so the table is 4 MiB whatever the text, and a lookup costs one cache line
// even when other work has evicted the table from the CPU's caches. A hot turn's 2 KiB tool
// output of recurring words renders in a tenth of the time, with 30 allocations instead of
// 3,115 (BenchmarkRenderToolOutput).
//
// # The sim model
//
// Sim is deterministic: its output is a pure function of the context's text and the settings
// (never of ids). In each step it either calls tools or answers.
//
// Tool choice: only function tools are callable (never namespace, custom or hosted tools), and
// of those only the ones tool_choice allows (a named function, or the allowed_tools set, whose
// mode — auto, required, none — then applies as below).
// tool_choice "none" → never call; "required" or a named function → call in every step (a
// named function that is not offered → answer); "auto" → call while the current user turn (the
// items since the last user message) has had fewer than sim.calls tool-call steps. It calls
// tool_choice's named function, else the function named by sim.tool, else the first shell-like
// tool (named exec_command, shell, shell_command or local_shell, or with a required cmd or
// command property), else the function tools in order, cycling for parallel calls. A step
// makes sim.parallel calls (1 when parallel_tool_calls is false), and no more than
// max_tool_calls allows: once the rollout has made max_tool_calls calls, it answers.
//
// Arguments fill the schema's required properties only, in the order of "required": a
// shell-like tool's cmd/command gets "echo tether-call-N" (["echo","tether-call-N"] when
// array-typed), N the call's number in the context (its function_call count + 1); otherwise
// const or the first enum value, string → the last word of the last user text (or "tether"),
// number/integer → 1, boolean → true, array → [], object → its required properties,
// recursively; anyOf/oneOf take the first non-null option.
//
// text.format shapes the answer: json_schema → a JSON value synthesised from the schema as
// arguments are (const/enum first, strings the last word of the last user text repeated up to
// minLength, numbers 1 clamped into minimum/maximum, arrays of minItems elements, objects their
// required properties, local $refs followed), so it validates against the schema; json_object →
// {"answer": the plain answer below}. Both are streamed as output_text deltas. A synthesised
// value (arguments or a json_schema answer) is built only as far as the step can stream it:
// max_output_tokens × 128 bytes (o200k_base's longest token), and never more than 1 MiB; a
// value cut at 1 MiB ends the step incomplete (max_output_tokens), as a model's own output
// limit does. The work is linear in that size, whatever minItems, minLength or nesting ask.
//
// The plain answer quotes every user text and tool output of the context, one line each (`user: "…"`,
// `tool: "…"`, Go-quoted, cut to 64 characters plus "…"), then optional filler (sim.answer_tokens),
// and ends with the context fingerprint, Fingerprint(Context.Tokens()):
// "[ctx N tokens 0xHHHHHHHHHHHHHHHH]" (token count, FNV-64a of the token ids). It is streamed
// in word-ish deltas (a delta ends before a token starting with a space or newline, or after 8
// tokens). max_output_tokens is honoured per step: generation stops when the step has
// generated that many tokens (StepResult.Incomplete = "max_output_tokens").
//
// Memory. The plain answer, and its json_object form, are produced as they stream, a few KiB
// at a time, never built whole: an answer of a million filler words (about 5 MiB) holds the
// delta being built and the tokenizer's next chunk, and the text it has streamed so far is
// counted by the rollout in the server's memory budget as it accrues (sampler.Config.Budget),
// so an answer that does not fit fails its step (failed, server_error) instead of being held.
// Tokens, deltas and text are those of the whole answer (the chunks are cut where they would
// be in it). A synthesised value (arguments, a json_schema answer) is built before it is
// streamed, so it is counted in the budget while it streams (values of 16 KiB or more); one
// that does not fit fails the step before any of it is streamed. The token ids of the calls a
// step generated, kept for the next step, count in the session's state (StateBytes).
//
// Metadata keys (all optional; CheckMetadata rejects bad values with invalid_value, the sim
// itself falls back to the defaults):
//
//	sim.calls          sequential tool-call steps per user turn (0…1048576, default 1)
//	sim.parallel       calls per step (1…128, default 1; 1 when parallel_tool_calls is false)
//	sim.tool           name of the function tool to call (ignored if not offered)
//	sim.fail           "step:N" (or "N"): the rollout's sampling step N (from 0) fails → the
//	                   rollout ends failed, error {code: server_error, message}
//	sim.speed          speed preset for this request: instant, 65, 1000, 4000
//	sim.answer_tokens  pad the answer with filler words to about this many tokens (0…1048576)
//
// Cost model (Speed.Cost): a step takes TTFT + (context tokens not cached) / prefill rate +
// (generated tokens) / decode rate:
//
//	preset   TTFT    prefill tokens/s   decode tokens/s
//	instant  0       free               free
//	65       500ms   3,000              65
//	1000     100ms   20,000             1,000
//	4000     30ms    80,000             4,000
//
// With SimOptions.Realtime the sim sleeps on that clock (timers honouring ctx, so
// testing/synctest drives it); otherwise it never sleeps and reports StepResult.ModelTime.
//
// # Context window
//
// SimOptions.ContextWindow (tether serve -model-context, 1,048,576 by default there; 0 = none)
// gives the sim a context window in its own tokens: the rendered context, instructions,
// items, their markers and the model's output included. Without it an input was bounded by
// bytes only (-max-rollout-bytes): sixty item_references to one stored MiB made one 3 KB
// create tokenize 60 MB.
//
// What a client sees. Input that would take a rollout's context past the window fails the
// rollout: its response ends failed with error {code: "context_length_exceeded", message
// naming the window}, output [] and zero usage; over HTTP without stream that is a 200 with the
// failed Response, on a stream response.created, response.in_progress, then response.failed.
// The sampler reports it as every backend's refused input (the *protocol.Error is 400,
// invalid_request_error, param input; its code and message become the Response's error), which
// is how the chat backend already reports an engine that refuses a prompt over its context
// (llama-server's 400 "exceeds the available context size" → failed, context_length_exceeded).
// OpenAI's API refuses such input with the same code: a 400 error {type:
// invalid_request_error, code: context_length_exceeded, param: input} without a stream, and on
// a stream response.created, response.in_progress and then an error event with that code. The
// sim keeps Tether's one way of reporting a model's refusal after response.created: a
// response.failed, which every client already handles (a failed Response is not stored, so
// GET /v1/responses/{id} does not find it), rather than an error event with no terminal
// Response. The check runs where the tokens are counted,
// in the rollout's first step (or warm-up), not before the rollout starts: knowing an input's
// tokens takes tokenizing it.
//
// A step whose output fills the window ends incomplete with reason context_length_exceeded
// (protocol.ReasonContextLength), as the chat backend reports an engine's context that filled
// while it generated (finish_reason "length" short of max_output_tokens); max_output_tokens,
// when it comes first, ends it as before.
//
// Where it holds. Every path that adds tokens counts them against the window: a create, a
// continuation on the hot path (the context grows each turn), a cold continuation (the chain
// rebuilt in one step), a warm-up (generate:false prefills), instructions (NewContext's
// render), a compaction item (expanded into items before the rollout starts) and an unparked
// session (its tokens come from the parked state, the window from the Sim that unparks it). A
// refused continuation ends its rollout, as an engine's refusal does through the chat
// backend: the rollout is not left suspended with input it could not take. Its context is as
// it was before the refused items (nothing of them is kept), and the response it continued
// stays whole in the store: a continuation of it that fits is answered, on the cold path.
//
// Cost. The check must not cost what it guards against. A render is watched only when the
// items could pass the window: a token of o200k_base holds at least one byte of its text
// (FuzzRender checks it), so an item renders to at most its text's bytes plus its markers and
// header (maxTokens; an unmodelled item's raw JSON counts 3 tokens a byte, the most its
// decoded strings can hold). When the context's tokens plus that bound fit, the render runs
// exactly as without a window. Otherwise every chunk of text (at most 2048 bytes) is counted as
// it is tokenized, and the render stops after the chunk that passes the window: a refused input
// costs at most the window's worth of tokenizing and one chunk, however large it is (the sixty
// references to one MiB stop after about a MiB), and nothing of it is kept. The check is a
// comparison per chunk, so a turn costs O(its new tokens) as before (BenchmarkRenderToolOutput,
// window-watched). Bytes cannot refuse an input before it is tokenized: a token may hold up
// to 128 bytes, and DEL renders to no token at all, so no byte count is a lower bound of
// tokens below 128 times the window.
//
// # Caveats
//
//   - tool_choice "required" (or a named function) calls in every step, as the API does: an
//     append-shape rollout then only ends by max_tool_calls, cancel or timeout.
//   - Output tokens are the model's count; the context grows by the render of the model items
//     (with their markers), which is what the next step counts as cached.
package sim
