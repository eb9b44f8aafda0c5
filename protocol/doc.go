// Package protocol is Tether's wire vocabulary: the Response object,
// input and output items, tools, usage, the client events (response.create, response.append,
// …), the server events, the error envelope and the table of error codes, with strict
// decoding that names the offending parameter, allocation-light encoding, and SSE framing.
// It imports only the standard library, github.com/google/uuid (NewID) and
// github.com/go-json-experiment/json/jsontext (the tokenizer of its decoders), and nothing of
// ours; every other layer speaks it.
//
// Entry points:
//
//   - [DecodeClientEvent] turns one client frame into a [ClientEvent], or a 400 [*Error] whose
//     Param is the path of the bad value ("input[2].content[0].text"). [DecodeCreateParams]
//     does the same for a POST /v1/responses body.
//   - [AppendEvent] encodes a server [Event]; [AppendError] the WebSocket error envelope and
//     [AppendHTTPError] the HTTP error body.
//   - [AppendSSE] frames an event for text/event-stream; [SSEReader] reads such a stream.
//   - [CheckCreate] and [CheckContinuation] judge a create where it arrives ([Where]) and the
//     tool outputs of a continuation; [ForShape] answers an unknown event type with the shape's
//     list ([AppendEventTypes], [PublicEventTypes]).
//   - [NewID] makes ids ("resp_…"), [NewResponse] the in_progress Response of a create,
//     [Finish] the ended one and [TerminalEvent] the event that carries it; [WithIDs] gives
//     stored input items their ids.
//
// The types implement json.Marshaler (and Item, ContentPart, Tool and ToolChoice
// json.Unmarshaler with the decoder's rules), so a Response can also go through
// encoding/json; the Append functions are the fast path and never HTML-escape.
//
// # Protocol flow
//
// Protocol flow: the append shape, one Rollout = one Response id and one
// sequence_number space over all its events (0, 1, 2 … without gaps; error frames carry none):
//
//	→ response.create {model, input, tools, …}
//	← response.created {response: status in_progress, output []}          seq 0
//	← response.in_progress {response}                                       seq 1
//	← response.output_item.added {output_index 0, item: function_call, arguments ""}
//	← response.function_call_arguments.delta {item_id, output_index, delta} …
//	← response.function_call_arguments.done {item_id, output_index, name, arguments}
//	← response.output_item.done {output_index 0, item: status completed}
//	← response.done {response_id, pending_call_ids [call_a], output [items since the last
//	                 suspension], usage (cumulative)}       — the rollout is suspended
//	→ response.append {response_id, input: [function_call_output call_a, …messages]}
//	      (a bad append is answered by one error frame; the rollout stays suspended)
//	← response.output_item.added {output_index 1, item: message, content []}  — resumed, no
//	                                                               lifecycle event on resume
//	← response.content_part.added {item_id, output_index, content_index, part}
//	← response.output_text.delta {item_id, output_index, content_index, delta, logprobs []} …
//	← response.output_text.done {…, text}
//	← response.content_part.done {…, part}
//	← response.output_item.done {output_index 1, item}
//	← response.completed {response: status completed, output [all model items], usage}
//
// response.cancel {response_id} ends a running or suspended rollout with response.incomplete
// (incomplete_details.reason "cancelled"). The public shape has the same
// events without response.done: each suspension ends a public Response with
// response.completed, and the next response.create with previous_response_id continues it.
// In the append shape a response.create with previous_response_id starts a rollout whose context
// is rebuilt; its response.created carries {"continuation":{"path":"cold","reason":…}}
// ([Continuation]).
//
// # Client events
//
//   - response.create ([EventCreate]): the flat CreateParams body; both shapes.
//   - response.append ([EventAppend]): {response_id, input}; append shape.
//   - response.cancel ([EventCancel]): {response_id}; append shape.
//   - response.processed ([EventProcessed]): {response_id}; sent by Codex, no reply.
//   - response.steer ([EventSteer]): kept verbatim; answered with response.steer.failed.
//
// # Server events
//
// response.created, response.in_progress, response.output_item.added / .done,
// response.content_part.added / .done, response.output_text.delta / .done,
// response.function_call_arguments.delta / .done, response.completed, response.incomplete,
// response.failed, response.done (append shape only), response.steer.failed, error. The
// constants [EventCreated] … [EventError] ([EventType]) give each payload; one constructor per
// type ([Created], [OutputTextDelta], [Done], [Terminal], …) builds an [Event] with exactly the
// fields that type encodes. Client event types are [ClientEventType].
//
// # Errors
//
// WebSocket: {"type":"error","status":N,"error":{"type","code","message","param"}}; HTTP:
// {"error":{"message","type","param","code"}} with status N. code is always a string, param
// a path or null. Every bad frame is answered; the connection stays usable except after the
// closes noted below.
//
// In Go, checks return an error (never a nil *Error in the interface). A request-scoped
// error is an [*Error]: answered with its envelope, the connection stays usable. A
// connection-fatal error is a [*ConnectionError] (websocket_message_too_large then 1009,
// websocket_connection_limit_reached then 1001): its envelope, then the close. [AsError],
// [AsConnectionError] and [ErrorOf] take them apart.
//
//	case                                                status code                                 param
//	not JSON / truncated JSON / not an object           400    invalid_json                         null
//	type missing or null                                400    missing_required_parameter           type
//	unknown event type                                  400    unknown_event_type                   type
//	required field missing (e.g. model)                 400    missing_required_parameter           the field
//	wrong type / number that does not fit (1e400, 1.5   400    invalid_type                         the path
//	  for an integer)
//	value outside an enum (role "wizard"), metadata     400    invalid_value                        the path
//	  over its limits, a pattern mismatch, a tool_choice
//	  function or allowed tool not among tools
//	integer under / over its CreateBounds range         400    integer_below_min_value /            the path
//	  (max_output_tokens 1; top_logprobs 21)                   integer_above_max_value
//	number under / over its range (temperature 3)       400    decimal_below_min_value /            the path
//	                                                           decimal_above_max_value
//	string over / under its length (prompt_cache_key    400    string_above_max_length /            the path
//	  of 65 characters; an empty call_id)                      string_below_min_length
//	array over / under its length (tool_choice.tools)   400    array_above_max_length /             the path
//	                                                           array_below_min_length
//	background:true on a WebSocket, stream_id over      400    unsupported_parameter                the field
//	  HTTP, generate:false (append), and every value CreateFields rejects
//	  (top_logprobs > 0, conversation, …)
//	background:true with store:false (HTTP)             400    invalid_value                        store
//	a top-level member the event does not have          400    unknown_parameter                    the member
//	  ("temprature"; for a create: no row of
//	  CreateFields)
//	stream_id empty, over 256 characters or outside     400    invalid_stream_id (no stream_id)     stream_id
//	  [A-Za-z0-9_.-]
//	a new named lane past -max-lanes (32)               400    websocket_stream_limit_reached       stream_id
//	text.format json_schema whose schema does not       400    invalid_json_schema                  text.format.schema
//	  compile
//	item_reference to an id unknown to the connection   400    invalid_item_reference               input[i]
//	  and to the caller's stored items
//	compaction item Tether did not issue, or altered    400    invalid_compaction_item              input[i]
//	parent unknown, evicted or on another connection    400    previous_response_not_found          previous_response_id
//	function_call_output for a call not in the chain    400    tool_call_not_found                  input
//	continuation leaving a call without output          400    missing_tool_output                  input
//	two outputs for one call                            400    duplicate_tool_output                input
//	append/cancel: unknown response                     404    response_not_found                   response_id
//	model name holding a control character (U+0000-    404    model_not_found                      model
//	  U+001F, U+007F-U+009F), an invisible one (Cf,
//	  U+2028, U+2029) or longer than 256 bytes;
//	  GET /v1/models/{model} of a model not listed
//	append to a response that is not suspended          409    response_not_suspended               response_id
//	binary frame                                        400    unsupported_frame                    null
//	frame over -max-frame (then close 1009)             413    websocket_message_too_large          null
//	queue full                                          429    websocket_queue_limit_reached        null
//	connection age limit (then close 1001)              400    websocket_connection_limit_reached   null
//	response.steer (public shape): no error frame, a    —      steering_not_supported               —
//	  response.steer.failed event carries the error
//	internal failure before a response exists           500    server_error (type server_error)     null
//	response.cancel of a rollout that has ended         409    response_already_completed           response_id
//	previous_response_id of a rollout still running     409    response_in_progress                 previous_response_id
//	  on this append connection
//	DELETE of a background response still running       409    response_in_progress                 null
//	previous_response_id of a background response       409    response_in_progress                 previous_response_id
//	  still running (HTTP)
//	create or upgrade while the server drains (HTTP;    503    server_shutting_down                 null
//	  with Retry-After: 1)
//	over the live-rollout cap (connection or server),   429    rollout_limit_reached                null
//	  or the connection's live rollouts hold too much
//	create/append over the per-rollout memory cap       400    rollout_too_large                    input
//	upgrade over the connection cap, or a request on a  503    too_many_connections                 null
//	  connection over -max-http-connections (HTTP;
//	  with Retry-After: 1)
//	POST body over -max-frame (HTTP; by its             413    request_body_too_large               null
//	  Content-Length before anything is read)
//	POST body not received within -read-timeout         408    request_timeout                      null
//	  (HTTP; the connection is closed)
//	frame, body or rollout over the server-wide         503    server_overloaded (type server_error) null
//	  -max-memory budget, or over -max-decoding POSTs
//	  being decoded (the connection stays usable)
//	create or upgrade over a per-key quota (live        429    quota_exceeded                       null
//	  rollouts, WebSocket connections)
//	the client went away while its large body or frame  499    client_closed_request                null
//	  waited for a heavy-work slot (never sent: the
//	  access log and tether_errors_total record it)
//	upgrade with -websocket=false (HTTP)                426    websocket_disabled                   null
//	upgrade without Sec-WebSocket-Version 13 or one     400    invalid_websocket_handshake          null
//	  valid Sec-WebSocket-Key (HTTP)
//	upgrade naming an append-shape version not served   400    invalid_value                        null (header) /
//	  (OpenAI-Beta responses_append=v2,                                                             protocol (query)
//	  ?protocol=append.v2) (HTTP)
//	missing or wrong API key (HTTP, upgrade)            401    invalid_api_key                      null
//	method not served on /v1/responses or               405    method_not_allowed                   null
//	  /v1/chat/completions (HTTP; with an Allow header)
//	the store failed or timed out (-store-timeout):     503    store_unavailable (type server_error) null
//	  a lookup of previous_response_id or a GET/DELETE
//	  /v1/responses/{id}; a store:true response whose
//	  write fails ends response.failed with this code;
//	  over HTTP with Retry-After: 1
//
// Failures after response.created are not error frames but response.failed with
// response.error {code, message}.
//
// # Decoding decisions
//
//   - Every number anywhere in a frame must fit a float64, including in ignored members:
//     1e400 is invalid_type at its path (encoding/json could not decode it later).
//   - Integer fields accept integral numbers in any notation (5.0, 1e3); fractions and values
//     beyond ±2^53 are invalid_type. Ranges, enums and lengths are the rows of CreateBounds,
//     checked while decoding (docs/fields.md): a decode error anywhere wins, then the first
//     violation in document order.
//   - CreateFields gives every create field's status; its rejected values are
//     unsupported_parameter, decided in the decoder, so every transport answers alike.
//   - A null member is the same as an absent one; a required member that is null is missing.
//     model "" is missing.
//   - Input items: message (also without "type" when "role" is present), function_call and
//     function_call_output are modelled; any other item type (reasoning, item_reference,
//     hosted-tool items) is kept verbatim in Item.Raw, compacted. An object with neither
//     "type" nor "role" is missing_required_parameter input[i].type. String content becomes
//     one input_text part (output_text for assistant messages). Content part types other
//     than input_text, output_text, refusal, summary_text and reasoning_text are kept in Raw
//     (input_image, input_file, and types newer clients may send).
//   - A top-level member the event does not have is unknown_parameter, as OpenAI answers it:
//     a create knows the rows of CreateFields (the Responses API's create request plus what
//     real clients send: generate, stream_id, event_id, client_metadata); response.append
//     knows type, response_id, input and event_id; response.cancel and response.processed
//     know type, response_id and event_id. "type" in a POST body is accepted and ignored,
//     whatever its kind. Unknown members of nested objects (items, content parts, tools) are
//     ignored (new client releases must not break us); they are not echoed.
//   - Arrays decode to non-nil slices, also when empty, so input: [] differs from no input.
//   - A frame that is not valid UTF-8 is answered invalid_json (JSON text and WebSocket text
//     frames must be UTF-8); the connection stays usable.
//   - A repeated top-level member (two "type", two "model", …) is answered invalid_value with
//     the key as param; in nested objects the last occurrence wins, as in encoding/json.
package protocol
