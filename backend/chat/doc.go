// Package chat is the "chat" model backend: a sampler.Model over any OpenAI-compatible Chat
// Completions engine (llama.cpp llama-server, vLLM, Ollama, LM Studio, OpenAI, or another
// Tether), reached at Options.BaseURL + "/chat/completions" with streamed requests.
//
// # Conversion
//
// A session keeps the rollout's converted message list; each Sample converts only
// step.Output and step.Input (chatapi.MessagesFromItems) and sends the whole list.
// instructions → a first "system" message; user / assistant / system messages keep their role,
// developer messages are sent as "system"; function_call items → assistant tool_calls
// (consecutive calls, and the assistant text right before them, merge into one assistant
// message); function_call_output → a "tool" message. Reasoning items are dropped (a chat
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
// finish_reason "length" → StepResult.Incomplete = max_output_tokens. Usage comes from the
// final chunk: InputTokens = prompt_tokens, OutputTokens = completion_tokens, CachedTokens =
// usage.prompt_tokens_details.cached_tokens, else llama.cpp's timings.cache_n, else 0. SSE
// comments (keep-alive pings) are skipped, and so are reasoning_content deltas (the Responses
// reasoning item is not produced by this backend).
//
// # Engine slots
//
// With Options.Slots = N > 0, each rollout pins one engine slot for its life: Open takes a
// free slot id and every request of the rollout carries "id_slot": id and "cache_prompt":
// true (llama.cpp llama-server, or another Tether); Close frees it. When all N are pinned, a
// new rollout runs unpinned (no id_slot: llama-server picks an idle slot by prefix
// similarity) rather than waiting for a rollout to end. With 0 nothing is pinned (vLLM's
// automatic prefix caching, OpenAI's prompt caching).
//
// # Failures
//
// Cancel, disconnect, suspend timeout and shutdown end the request's context, which aborts the
// upstream request. Options.Timeout bounds silence: no byte from the upstream for that long
// (before the headers or between chunks) fails the step. An upstream 400, 413 or 422 fails the
// step with a *protocol.Error (invalid_request_error, code invalid_prompt, the upstream's
// message); 401 / 403 fail it as a configuration error (server_error; the upstream's message
// is not echoed); any other status, a refused connection, a malformed chunk, an error object
// in the stream, or a stream that ends without finish_reason fail it with server_error and a
// message naming the cause. The rollout then ends response.failed.
package chat
