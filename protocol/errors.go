package protocol

import (
	"errors"
	"fmt"
)

// Error codes of the error table (architecture §8; the full table is in doc.go).
const (
	CodeInvalidJSON              = "invalid_json"
	CodeMissingRequiredParameter = "missing_required_parameter"
	CodeUnknownEventType         = "unknown_event_type"
	CodeInvalidType              = "invalid_type"
	CodeInvalidValue             = "invalid_value"
	CodeUnsupportedParameter     = "unsupported_parameter"
	CodePreviousNotFound         = "previous_response_not_found"
	CodeToolCallNotFound         = "tool_call_not_found"
	CodeMissingToolOutput        = "missing_tool_output"
	CodeDuplicateToolOutput      = "duplicate_tool_output"
	CodeResponseNotFound         = "response_not_found"
	CodeResponseNotSuspended     = "response_not_suspended"
	CodeUnsupportedFrame         = "unsupported_frame"
	CodeMessageTooLarge          = "websocket_message_too_large"
	CodeQueueLimit               = "websocket_queue_limit_reached"
	CodeConnectionLimit          = "websocket_connection_limit_reached"
	CodeSteeringNotSupported     = "steering_not_supported"
	CodeServerError              = "server_error"
)

// Error types (error.type).
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

// Errorf returns an invalid_request_error with the given status, code and param.
func Errorf(status int, code, param, format string, args ...any) *Error {
	return &Error{Status: status, Type: TypeInvalidRequest, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}
