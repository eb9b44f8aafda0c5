package client

import (
	"errors"
	"fmt"
)

// Error is an error the server sent: an error frame (returned by Events), or the error body of
// a refused WebSocket upgrade (returned by Dial, or by the call that dialed again). It mirrors
// the API error object {type, code, param, message} and the HTTP status. Codes are listed in
// docs/append-protocol.md, Errors. A Response that fails is not an Error: Events ends with
// its terminal event, whose Event.Final has Status "failed" and the ResponseError.
type Error struct {
	// Status is the HTTP status: the error frame's (400, 404, 409, 413, 429, 500, 503, …; 0
	// when the frame carries none), or the refused upgrade's (401, 403, 502, …).
	Status  int
	Type    string // "invalid_request_error" or "server_error"; "" for an upgrade refused without a JSON body
	Code    string // for example "missing_tool_output"
	Param   string // the offending parameter path, or ""
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	s := "tether: " + e.Code
	if e.Status != 0 {
		s = fmt.Sprintf("tether: %d %s", e.Status, e.Code)
	}
	if e.Param != "" {
		s += " (" + e.Param + ")"
	}
	return s + ": " + e.Message
}

// AsError returns err as a *Error when it is or wraps one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

var (
	// ErrClosed is returned after Close by every call that would use the connection: Start,
	// Conn.Run, and Append, Cancel and Rollout.Run of any rollout of the Conn, whatever its
	// state (not ErrEnded, even for a rollout that had ended). Events returns it once for each
	// rollout that had not ended when the Conn was closed (suspended ones included), and such
	// a rollout has ended then. A call that Close overtakes returns an error that wraps it.
	ErrClosed = errors.New("client: connection closed")
	// ErrConnectionLost is returned by Events when the connection ended while the rollout was
	// sampling or queued and the server sent no terminal event. It wraps the read error.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrNotSuspended is returned by Append when the rollout does not wait for tool outputs.
	ErrNotSuspended = errors.New("client: rollout not suspended")
	// ErrEnded is returned by Append, Cancel and Rollout.Run on a rollout that has ended (Run:
	// ended by an error that an earlier Events returned; a rollout that has a final Response
	// returns it).
	ErrEnded = errors.New("client: rollout has ended")
	// ErrNotStarted is returned by Cancel while the create waits in the server's queue: its
	// response id is not known yet (append-protocol.md, Known limitations).
	ErrNotStarted = errors.New("client: rollout not started yet")
	// ErrCancelUnsupported is returned by Cancel on a public-shape rollout that is sampling: the
	// public shape has no response.cancel.
	ErrCancelUnsupported = errors.New("client: the public shape cannot cancel a sampling response")
	// ErrCannotContinue is returned by Append after a reconnect when the rollout can be continued
	// neither from the store (store:false) nor by replay (its create named a previous_response_id).
	ErrCannotContinue = errors.New("client: rollout cannot be continued on a new connection")
	// ErrMaxTurns is returned by Run when the rollout suspends more often than RunOptions.MaxTurns;
	// Run cancels the rollout first.
	ErrMaxTurns = errors.New("client: too many tool-call turns")
	// ErrUnknownTool is the cause reported to the model (as the tool output) for a call whose name
	// has no handler in RunOptions.Tools.
	ErrUnknownTool = errors.New("client: unknown tool")
)
