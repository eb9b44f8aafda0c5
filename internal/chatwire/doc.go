// Package chatwire is the OpenAI Chat Completions wire format as Tether uses it on both sides:
// the request, message, tool call, chunk and completion shapes (Request, Message, Chunk,
// Completion, ErrorEnvelope), and the conversion between chat messages and Responses items
// and between a request's generation fields and sampler.Settings.
//
// Package chatapi serves POST /v1/chat/completions with it (ItemsFromMessages,
// SettingsFromRequest); package sampler/chat is a client of an upstream engine with it
// (MessagesFromItems, CheckItems, Request.SetSettings). It depends on protocol and sampler
// only, so that a model backend does not link the server's connection core.
//
// # Messages → items (serving)
//
// The first message, when its role is "system", becomes the instructions; later system and
// all developer messages are message items of their role; user messages are user messages
// (string content, or "text" and "image_url" parts, which become input_text and input_image
// parts in order; other part types are rejected); an assistant message becomes an assistant
// message item (when it has text) then one function_call item per tool_calls entry (call_id =
// the entry's id); a "tool" message becomes a function_call_output (call_id = tool_call_id).
// max_completion_tokens (else max_tokens) becomes max_output_tokens; response_format becomes
// text.format; metadata, tools, tool_choice, parallel_tool_calls, temperature, top_p,
// presence_penalty, frequency_penalty, verbosity (text.verbosity) and reasoning_effort map one
// to one.
//
// # Items → messages (a client of an engine)
//
// MessagesFromItems is the reverse, with the rules package sampler/chat documents: developer
// messages are sent as system, consecutive function calls merge into one assistant message
// with tool_calls, reasoning items are dropped, and item types or parts an engine cannot take
// are errors (CheckItems finds them before a response starts).
package chatwire
