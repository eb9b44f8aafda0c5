// Package chatapi is Tether's POST /v1/chat/completions (OpenAI Chat Completions): Handler
// serves the endpoint from any sampler.Model with llama.cpp-compatible slot emulation (Slots).
// The wire shapes and the conversion between chat messages and Response items are package
// internal/chatwire's, which package sampler/chat shares as a client of an upstream engine.
//
// # Serving /v1/chat/completions
//
// Handler decodes the body (at most MaxBody bytes), converts messages to items and the other
// fields to sampler.Settings, runs one sampling step of the server's Model on a slot's
// ModelSession, and answers one chat.completion JSON or, with "stream": true, an SSE stream
// of chat.completion.chunk objects ("data: {…}" lines, then "data: [DONE]"): a role delta,
// content deltas, tool_calls deltas (index, id, type and function.name on a call's first
// delta, function.arguments fragments after), a finish chunk (finish_reason "stop",
// "tool_calls" or "length") and, with stream_options.include_usage, a usage chunk with
// "choices": []. Usage has prompt_tokens, completion_tokens, total_tokens and
// prompt_tokens_details.cached_tokens; "timings" {cache_n, prompt_n, predicted_n} follows
// llama.cpp. Errors use OpenAI's envelope {"error":{message,type,param,code}}; an error after
// the stream began is sent as one "data: {"error":…}" event and the stream ends without
// [DONE].
//
// Messages become items and the other fields sampler.Settings as package chatwire documents.
// A top-level member OpenAI's Chat Completions does not have is 400 unknown_parameter
// ("Unrecognized request argument supplied: …", as OpenAI answers it). Members that do not
// change the answer (user, safety_identifier, prompt_cache_key, prompt_cache_retention,
// store, service_tier) are accepted and ignored; members that would change it and are not
// implemented (seed, stop, logprobs, top_logprobs, logit_bias, modalities, audio, prediction,
// web_search_options, functions, function_call) are 400 unsupported_parameter when given a
// value other than null, false, "", [] or {} (or top_logprobs 0). Any method but POST is 405
// (the server's route).
//
// # llama.cpp-compatible slot emulation
//
// Slots keeps N slots, each holding one open ModelSession and the items it has seen,
// including what it generated. A request names a slot with "id_slot" (≥ 0) or lets the server
// pick one (-1 or absent: the idle slot whose items are the longest prefix of the request's,
// else the least recently used idle slot). When the slot's items (compared by content:
// role and text, name and arguments, output; never ids) are a prefix of the request's items
// and the settings are equal, only the new items are fed to the session, so a backend with a
// KV cache (the sim, or a chat backend pinned to an engine slot) reports the prefix as
// cached_tokens; otherwise (or with "cache_prompt": false) the slot's session is closed and a
// new one opened. A busy slot makes the request wait, as llama.cpp defers a task. A slot keeps
// at most SlotOptions.MaxBytes of items (the server passes -max-rollout-bytes; larger contexts
// are answered but not kept) and is freed after SlotOptions.Idle unused (the server passes
// -suspend-timeout). GET /slots lists the slots (Handler.ServeSlots).
//
// # Limits
//
// A chat completion reports to the same accountant as /v1/responses: its body is read under
// the server's memory budget and decoding bound (Handler.ReadBody: 503 server_overloaded),
// the items a slot keeps are counted in that budget (SlotOptions.Budget; a context that does
// not fit is answered but not kept), its sampling step waits for the server-wide admission
// (Handler.Admission, -max-sampling), and the server counts the running request as a live
// rollout of its key (429 quota_exceeded past -key-rollouts). A backend that panics fails the
// request with a 500 server_error; the value and stack are logged (Handler.Logger,
// SlotOptions.Logger).
package chatapi
