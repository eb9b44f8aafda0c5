package protocol

import (
	"context"
	"errors"
	"fmt"
)

// Error codes of the error table (the full table is in doc.go). Each comment
// gives the HTTP status and the param.
const (
	// CodeInvalidJSON (400, param null): the frame is not JSON, truncated, or not an object.
	// Returned by DecodeClientEvent and DecodeCreateParams.
	CodeInvalidJSON = "invalid_json"
	// CodeMissingRequiredParameter (400, param the field): "type", "model", "response_id",
	// "input[i].call_id", … missing or null. Returned by DecodeClientEvent.
	CodeMissingRequiredParameter = "missing_required_parameter"
	// CodeUnknownEventType (400, param "type"): a client event type this server does not know.
	CodeUnknownEventType = "unknown_event_type"
	// CodeInvalidType (400, param the path): wrong JSON type, or a number out of range (1e400,
	// a fraction or negative where an integer ≥ 0 or ≥ 1 is required).
	CodeInvalidType = "invalid_type"
	// CodeInvalidValue (400, param the path): a string outside its enum (role, status,
	// tool_choice, truncation, text.verbosity), or metadata over its limits.
	CodeInvalidValue = "invalid_value"
	// CodeUnsupportedParameter (400, param the field): background:true, stream_id over HTTP,
	// or generate:false on an append-shape connection (decided by the adapters).
	CodeUnsupportedParameter = "unsupported_parameter"
	// CodeInvalidHandshake (400, param null): a WebSocket upgrade request that RFC 6455 does
	// not allow: no or another Sec-WebSocket-Version than 13 (answered with
	// Sec-WebSocket-Version: 13), a missing, repeated or malformed Sec-WebSocket-Key, or
	// HTTP/1.0.
	CodeInvalidHandshake = "invalid_websocket_handshake"
	// CodeUnknownParameter (400, param the member): a top-level member that the client event
	// does not have — for a create, one that is not a row of CreateFields ("temprature");
	// for response.append, response.cancel and response.processed, one other than type,
	// response_id, input (append only) and event_id. Returned by DecodeClientEvent and
	// DecodeCreateParams.
	CodeUnknownParameter = "unknown_parameter"
	// CodePreviousNotFound (400, param "previous_response_id"): parent unknown, evicted or on
	// another connection.
	CodePreviousNotFound = "previous_response_not_found"
	// CodeToolCallNotFound (400, param "input"): a function_call_output for a call not in the
	// chain.
	CodeToolCallNotFound = "tool_call_not_found"
	// CodeMissingToolOutput (400, param "input"): a continuation leaves a call without output.
	CodeMissingToolOutput = "missing_tool_output"
	// CodeDuplicateToolOutput (400, param "input"): two outputs for one call.
	CodeDuplicateToolOutput = "duplicate_tool_output"
	// CodeResponseNotFound (404, param "response_id"): append/cancel of an unknown response.
	CodeResponseNotFound = "response_not_found"
	// CodeResponseNotSuspended (409, param "response_id"): append to a response that is not
	// suspended.
	CodeResponseNotSuspended = "response_not_suspended"
	// CodeUnsupportedFrame (400, param null): a binary WebSocket frame.
	CodeUnsupportedFrame = "unsupported_frame"
	// CodeMessageTooLarge (413, param null): a frame over -max-frame; then close 1009.
	CodeMessageTooLarge = "websocket_message_too_large"
	// CodeQueueLimit (429, param null): the connection's FIFO queue is full.
	CodeQueueLimit = "websocket_queue_limit_reached"
	// CodeConnectionLimit (400, param null): the connection age limit; then close 1001.
	CodeConnectionLimit = "websocket_connection_limit_reached"
	// CodeSteeringNotSupported: carried by response.steer.failed (public shape), not by an
	// error frame.
	CodeSteeringNotSupported = "steering_not_supported"
	// CodeServerError (500, type server_error, param null): an internal failure before a
	// response exists; also response.failed's response.error.code.
	CodeServerError = "server_error"

	// Rows added to the error table (see doc.go).

	// CodeAlreadyCompleted: response.cancel for a rollout that has ended. 409, param response_id.
	CodeAlreadyCompleted = "response_already_completed"
	// CodeNotBackground: POST /v1/responses/{id}/cancel for a response that was not created
	// with background:true ("Cannot cancel a synchronous response."). 400, param null.
	CodeNotBackground = "response_not_background"
	// CodeEventsExpired: GET /v1/responses/{id}?stream=true with a starting_after older than
	// the events kept for the background response (a bounded tail), or none are kept any more.
	// 400, param starting_after.
	CodeEventsExpired = "response_events_expired"
	// CodeResponseInProgress: previous_response_id names a rollout of this connection that has
	// not ended (append shape), or a background response that has not ended (HTTP), 409,
	// param previous_response_id; or a DELETE names a background response that has not
	// ended, 409, param null.
	CodeResponseInProgress = "response_in_progress"
	// CodeShuttingDown: a create or an upgrade while the server or connection drains. 503.
	CodeShuttingDown = "server_shutting_down"
	// CodeRolloutLimit: a create over the live-rollout caps (per connection or server). 429.
	CodeRolloutLimit = "rollout_limit_reached"
	// CodeRolloutTooLarge: a create or append over the per-rollout memory cap. 400, param input.
	CodeRolloutTooLarge = "rollout_too_large"
	// CodeModelNotFound: a model no backend serves: GET /v1/models/{model} of a model not
	// listed, a model name holding a control character (CheckModelName), a chat upstream's 404.
	// 404, param model.
	CodeModelNotFound = "model_not_found"
	// CodeTooManyConnections: an upgrade over the connection cap. 503 (HTTP).
	CodeTooManyConnections = "too_many_connections"
	// CodeBodyTooLarge: a POST body over -max-frame. 413 (HTTP).
	CodeBodyTooLarge = "request_body_too_large"
	// CodeWebSocketDisabled: an upgrade to a server run with -websocket=false. 426 (HTTP).
	CodeWebSocketDisabled = "websocket_disabled"
	// CodeInvalidAPIKey: a missing or wrong API key. 401 (HTTP, also on the upgrade).
	CodeInvalidAPIKey = "invalid_api_key"
	// CodeMethodNotAllowed: a method /v1/responses or /v1/chat/completions does not serve. 405
	// (HTTP), with an Allow header.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeStoreUnavailable: the store of stored responses (-store) failed or did not answer
	// within -store-timeout. 503, type server_error: an error frame or HTTP error for a lookup
	// (previous_response_id, GET/DELETE /v1/responses/{id}); response.error.code of a store:true
	// response that ends response.failed because it could not be stored.
	CodeStoreUnavailable = "store_unavailable"
	// CodeOverloaded: the server-wide memory budget (-max-memory) or the bound on HTTP requests
	// being decoded at once is exhausted; nothing was read past the refusal. 503 (HTTP and
	// WebSocket; the connection stays usable).
	CodeOverloaded = "server_overloaded"
	// CodeRequestTimeout: a POST body was not received within -read-timeout. 408 (HTTP; the
	// connection is closed).
	CodeRequestTimeout = "request_timeout"
	// CodeQuotaExceeded: a create or upgrade over a per-key quota (suspended rollouts,
	// connections). 429.
	CodeQuotaExceeded = "quota_exceeded"
	// CodeClientClosed: the client went away (closed its connection) before its request was
	// answered, and the heavy work it asked for was not done. StatusClientClosed (499); no
	// client reads it: the HTTP access log and tether_errors_total record it. ClientClosed
	// returns it.
	CodeClientClosed = "client_closed_request"

	// Bounds of CreateBounds (OpenAI's codes), all 400 with param the value's path.

	// CodeIntegerBelowMin: an integer under its minimum (max_output_tokens < 16).
	CodeIntegerBelowMin = "integer_below_min_value"
	// CodeIntegerAboveMax: an integer over its maximum (top_logprobs > 20).
	CodeIntegerAboveMax = "integer_above_max_value"
	// CodeDecimalBelowMin: a number under its minimum (temperature < 0).
	CodeDecimalBelowMin = "decimal_below_min_value"
	// CodeDecimalAboveMax: a number over its maximum (top_p > 1).
	CodeDecimalAboveMax = "decimal_above_max_value"
	// CodeStringAboveMaxLength: a string over its maxLength in characters (prompt_cache_key > 64).
	CodeStringAboveMaxLength = "string_above_max_length"
	// CodeStringBelowMinLength: a string under its minLength (an empty call_id).
	CodeStringBelowMinLength = "string_below_min_length"
	// CodeArrayAboveMaxLength: an array over its maxItems (tool_choice.tools > 128).
	CodeArrayAboveMaxLength = "array_above_max_length"
	// CodeArrayBelowMinLength: an array under its minItems (an empty tool_choice.tools).
	CodeArrayBelowMinLength = "array_below_min_length"
	// CodeObjectAboveMaxProperties: an object over its maxProperties (CreateBounds has none
	// today: metadata keeps invalid_value).
	CodeObjectAboveMaxProperties = "object_above_max_properties"
	// CodeInvalidItemReference (400, param "input[i]"): an item_reference to an id that is not
	// among the connection's items, the caller's live append-shape items on this instance or
	// the caller's stored items.
	CodeInvalidItemReference = "invalid_item_reference"
	// CodeInvalidCompaction (400, param "input[i]"): a compaction item this server did not
	// issue, or whose content was altered.
	CodeInvalidCompaction = "invalid_compaction_item"
	// CodeInvalidSchema (400, param "text.format.schema"): a json_schema format whose schema
	// does not compile.
	CodeInvalidSchema = "invalid_json_schema"
)

// StatusClientClosed is the status recorded for a request whose client went away before it
// was answered (nginx's "client closed request"); it is never sent.
const StatusClientClosed = 499

// ClientClosed returns the client_closed_request error (StatusClientClosed) of a request or
// frame whose context ended before it was served (CPUSlot): DecodeCreateParams,
// DecodeClientEvent and DecodeSteer return it.
func ClientClosed() *Error {
	return &Error{Status: StatusClientClosed, Type: TypeInvalidRequest, Code: CodeClientClosed,
		Message: "The client went away before its request was served."}
}

// IsClientClosed reports whether err is or wraps the client_closed_request error.
func IsClientClosed(err error) bool {
	e, ok := AsError(err)
	return ok && e != nil && e.Code == CodeClientClosed
}

// HeavySlot is CPUSlot for the work of a request or frame: it takes a heavy-work slot for n
// bytes of ctx's work, or returns a no-op release and ClientClosed (499) when ctx ends first,
// the error a handler records for a client that went away.
func HeavySlot(ctx context.Context, n int) (release func(), _ *Error) {
	release, err := CPUSlot(ctx, n)
	if err != nil {
		return release, ClientClosed()
	}
	return release, nil
}

// Error types (error.type): TypeInvalidRequest for 4xx, TypeServer for 5xx.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// Error is the API error object: on WebSocket the envelope
// {"type":"error","status":Status,"error":{"type","code","message","param"}}, on HTTP
// {"error":{"message","type","param","code"}} with HTTP status Status. Param is a path such as
// "input[2].content[0].text", or "" (encoded null).
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
	Param   string
	// StreamID is the lane the error is attributed to: the envelope carries
	// it when not "" (the default lane). See InLane.
	StreamID string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s (%s, param %s): %s", e.Code, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("%s (%s): %s", e.Code, e.Type, e.Message)
}

// AsError reports whether err wraps an *Error and returns it.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Errorf returns an error with the given status, code and param: an invalid_request_error
// for a status below 500, a server_error from 500 on.
func Errorf(status int, code, param, format string, args ...any) *Error {
	typ := TypeInvalidRequest
	if status >= 500 {
		typ = TypeServer
	}
	return &Error{Status: status, Type: typ, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// ErrorOf returns the payload of err's error envelope: the *Error that err is or wraps (also
// through a ConnectionError), or a server_error (500) for any other error. err must not be
// nil.
func ErrorOf(err error) *Error {
	if e, ok := AsError(err); ok && e != nil {
		return e
	}
	return &Error{Status: 500, Type: TypeServer, Code: CodeServerError, Message: "The server had an error."}
}

// CloseCode is a WebSocket close status code (RFC 6455, section 7.4.1) sent when a connection-fatal
// error ends a connection.
type CloseCode int

const (
	// CloseNormal (1000): the connection has done its work.
	CloseNormal CloseCode = 1000
	// CloseGoingAway (1001): the server drains the connection (shutdown, or the age limit
	// after websocket_connection_limit_reached).
	CloseGoingAway CloseCode = 1001
	// CloseMessageTooBig (1009): a frame over the limit, after websocket_message_too_large.
	CloseMessageTooBig CloseCode = 1009
)

// ConnectionError is a connection-fatal error, the counterpart of x/net/http2's
// ConnectionError: the connection sends the error envelope of Err, then closes with Code and
// Reason (the close frame's text), and reads nothing more. Today: a frame over -max-frame
// (websocket_message_too_large, 1009) and the connection age limit
// (websocket_connection_limit_reached, 1001).
//
// A request-scoped error is an *Error (http2's StreamError): it is answered with an error
// envelope and the connection stays usable. Functions return either as an error; tell them
// apart with AsConnectionError first (AsError also finds the payload of a ConnectionError).
type ConnectionError struct {
	Err    *Error
	Code   CloseCode
	Reason string
}

// Error implements error.
func (e *ConnectionError) Error() string {
	return fmt.Sprintf("connection closed (%d %s): %v", e.Code, e.Reason, e.Err)
}

// Unwrap returns the payload Err.
func (e *ConnectionError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// AsConnectionError reports whether err wraps a *ConnectionError and returns it.
func AsConnectionError(err error) (*ConnectionError, bool) {
	var e *ConnectionError
	ok := errors.As(err, &e)
	return e, ok
}
