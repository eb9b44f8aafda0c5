// Package chat is the "chat" model backend: a sampler.Model over any OpenAI-compatible Chat
// Completions engine (llama.cpp llama-server, vLLM, Ollama, LM Studio, OpenAI, or another
// Tether), reached at Options.BaseURL + "/chat/completions" with streamed requests.
//
// # Conversion
//
// A session keeps the rollout's converted message list; each Sample converts only
// step.Output and step.Input (chatwire.MessagesFromItems) and sends the whole list.
// instructions → a first "system" message; user / assistant / system messages keep their role,
// developer messages are sent as "system"; function_call items → assistant tool_calls
// (consecutive calls, and the assistant text right before them, merge into one assistant
// message; arguments that are not JSON, which a model may write without strict mode and
// llama-server answers 500 to, are sent as a JSON string holding the text); function_call_output → a "tool" message of its text, and its input_image parts
// (image_url: a URL or a data URL) → one user message after the run of tool messages, each
// call's images led by "Images from the output of call <call_id>:" (a chat tool message
// carries text only).
// Reasoning items are dropped (a chat
// engine cannot take them back); a user message's input_image parts (image_url: a URL or a
// data URL) become image_url content parts; other item types and other content parts are rejected
// at create with a 400 (CheckRequest; param input[i]) and fail the step (code invalid_prompt)
// if they arrive in a continuation. Non-function tools are dropped; tool_choice (auto, none, required, a named
// function) and parallel_tool_calls are sent only with tools; text.format → response_format;
// max_output_tokens → max_completion_tokens (also max_tokens with Options.LegacyMaxTokens,
// for Ollama and LM Studio); temperature, top_p, presence_penalty, frequency_penalty;
// text.verbosity → verbosity; reasoning.effort → reasoning_effort;
// metadata is passed through when non-empty (another Tether's sim honours its sim.* keys).
//
// # Streaming
//
// Requests set "stream": true and stream_options.include_usage. Content deltas become
// Output.Text; a tool call's first delta (its index, id and function.name) becomes
// Output.Call(name, id), so the engine's id is the call_id; arguments fragments become
// Output.Arguments. Parallel calls arrive one after another by index (a new id at the same
// index, as Ollama sends, is a new call); a delta for a call already closed fails the step.
// finish_reason "length" → StepResult.Incomplete = max_output_tokens when the step reached
// its max_output_tokens, else context_length_exceeded (the engine's context window is full).
// The step ends at [DONE], at the stream's end after a finish_reason, or at a chunk carrying
// usage after the finish_reason's chunk (nothing follows it but [DONE]: the body is closed
// there, so an engine that never sends [DONE] does not hold the step). Usage comes from the
// final chunk: InputTokens = prompt_tokens, OutputTokens = completion_tokens, CachedTokens =
// usage.prompt_tokens_details.cached_tokens, else llama.cpp's timings.cache_n, else 0. A step that
// ends before the engine reported usage (cancel, disconnect, a failure mid-stream) counts
// OutputTokens = the tokens Tether streamed (sampler.LimitedOutput's lower bound) and, once
// output began, InputTokens = the prompt_tokens the engine reported for the conversation's
// previous step (a lower bound: the messages only grow); 0 before either is known. SSE
// comments (keep-alive pings) are skipped, and so are reasoning_content deltas (the Responses
// reasoning item is not produced by this backend).
//
// # Engine slots
//
// With Options.Slots = N > 0, Tether owns N slots of each replica (llama.cpp llama-server -np):
// every request names one ("id_slot", with "cache_prompt": true), and no two rollouts sample on
// one slot at once. A rollout takes a slot at its first step and keeps it while it is
// suspended at tool calls, so its KV is still there when it resumes. A rollout that needs a
// slot when none is free takes the least recently used suspended rollout's slot; that
// rollout's KV is first saved with POST /slots/N?action=save (llama-server started with
// --slot-save-path, seen by Tether as Options.SlotDir) into a file named by its Response id and
// a random suffix, and restored with action=restore into whatever slot it gets before its next
// step. Files are removed when restored or when the rollout ends, and bounded in total bytes
// (Options.SlotSaveBytes; the oldest go first). A save whose file is then not in
// Options.SlotDir (it is not the engine's --slot-save-path as Tether sees it) counts as failed,
// is logged naming the directory, and turns saving off for that replica, so that files Tether
// can neither remove nor restore do not pile up in the engine's directory. A save that got no answer (a stalled engine)
// fails, and its file, which the engine may write when it runs again, is removed when the
// replica next answers a request sent after the save gave up. Without a slot directory, or when the engine
// cannot save, the rollout gives up its slot and its next step is prefilled again: its
// cached_tokens say so. When all N slots are sampling, a step waits for one. A replica's slot
// count (llama.cpp GET /props, total_slots) is checked by Model.Probe, and before the first step
// on a replica Probe could not check, that failed since, or whose stream broke off since: one with fewer than N slots takes no
// step (out of placement, as a failed replica; llama-server would take an id_slot past its last
// slot modulo its slot count, so two rollouts would share one). With 0, slot
// choice is the engine's (vLLM's automatic prefix caching, OpenAI's prompt caching).
//
// # Parking
//
// Sessions park (sampler.ParkableSession) and the Model unparks them (sampler.Unparker), so a
// rollout suspended at tool calls can give up its goroutine (-park-after, memory pressure) and
// a drain can park it to a shared store. The parked state is a small JSON value: the replica's
// BaseURL, how many items the session had converted and where its conversions started apart
// (the messages are rebuilt from the rollout's own items, exactly as sent before, not stored
// twice), and the name of the slot file holding its KV. When the rollout holds a slot and the
// engine can save, Park saves the slot (action=save) and frees it; KV already saved to a file
// is kept. Unpark puts the session back on that replica when this Model has it and it is
// healthy, and the file is restored into the slot its next step gets, so that step's
// cached_tokens cover the context. On another replica, or when the file is gone, the step is
// prefilled (cached_tokens say so) and never fails for it; the file is removed. Parked files
// count in Options.SlotSaveBytes with the others: one dropped by the bound makes the unparked
// step a prefill.
//
// A parked rollout may be resumed by another Tether instance (a drain parks it to the shared
// store and any instance claims it). The file name travels in the state, and the file is in
// the engine's --slot-save-path: instances that reach the same engine (the same BaseURL) must
// set Options.SlotDir to that same directory, as they see it, for the new instance to restore
// the file and remove it afterwards. An instance that reaches the engine under another BaseURL
// prefills. A file whose rollout is never resumed stays until the instance that parked it drops
// it under its bound or, once it is older than Options.SlotFileTTL (the suspend timeout: no
// suspension waits longer), until any instance sharing the directory sweeps it.
//
// # Replicas
//
// Options.BaseURLs may name several replicas of one engine. A rollout is placed when it opens on
// the least loaded replica (steps in flight plus rollouts placed) and all its steps go there.
// A replica that cannot be reached (refused, reset, silent before it answers), or answers 502,
// 503 or 504, is out of placement for a backoff (0.5 s doubling to 30 s; /health is asked
// before it takes a new rollout again); a step that could not reach its replica, and later
// steps of rollouts placed there, go to another replica with the whole conversation
// (prefilled there; cached_tokens say so). Nothing is lost. A stream that breaks off after
// the engine answered (EOF, reset, or its end without a finish_reason) fails that step only
// (part of the answer may have reached the client), and the replica's /health is asked at
// once: one that does not answer it (a crashed engine) is out of placement for its backoff
// as above, so no later rollout is placed there or pays a refused connect; one that answers
// stays, and its slot count is checked again before its next step (it may have restarted).
// Another 5xx fails that step only; the replica stays in placement. Per
// replica, Model (a prometheus.Collector) exports steps, failures by kind, health, slots held,
// reported prompt and cached tokens, and KV saves and restores.
//
// # Failures
//
// Cancel, disconnect, suspend timeout and shutdown end the request's context, which aborts the
// upstream request. Options.Timeout bounds silence: no byte from the upstream for that long
// (before the headers, or anywhere in the stream: a long event that arrives slowly is waited
// for while its bytes keep coming) fails the step. An upstream 400, 413 or 422 fails the
// step with a *protocol.Error (invalid_request_error, code invalid_prompt, the upstream's
// message; code CodeContextLengthExceeded, param input, when the upstream says the prompt is
// over its context: llama.cpp's error type exceed_context_size_error, vLLM's message "This
// model's maximum context length is …", or the code context_length_exceeded); 401 / 403 fail it as a configuration error (server_error; the upstream's message
// is not echoed); any other status, a refused connection, a malformed chunk, an error object
// in the stream, or a stream that ends without finish_reason fail it with server_error and a
// message naming the cause (a 200 answer that held no SSE event at all, such as a JSON
// chat.completion from an engine that ignored "stream": true or a web page at a wrong
// -upstream, names its Content-Type and quotes its first 200 bytes). The rollout then ends response.failed. Each failure is logged once
// (replica, kind, error; never content or keys) and counted by kind. Requests carry an
// Idempotency-Key, so that net/http resends one the engine closed a kept-alive connection
// under before reading it (llama-server advertises keep-alive and then closes after each
// streamed reply).
package chat
