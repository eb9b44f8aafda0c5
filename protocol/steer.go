package protocol

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// Steering events and codes: response.steer, WebSocket public shape only.
const (
	// EventSteerAccepted: {steer {id, previous_response_id}}: the rollout took the steer.
	EventSteerAccepted EventType = "response.steer.accepted"
	// EventSteerPending: {reason, required_input, steer {id, previous_response_id}}, after the
	// terminal event of a response that stopped for tool output: the steer's input follows the
	// outputs of required_input's calls.
	EventSteerPending EventType = "response.steer.pending"

	// SteerWaitingForInput is response.steer.pending's reason.
	SteerWaitingForInput = "waiting_for_required_input"
)

// response.steer.failed codes; the event carries error {type
// invalid_request_error, code, message}.
const (
	// CodeInvalidInput: the steer has no previous_response_id, or its input is empty or holds
	// anything but user messages of input_text, input_image and input_file parts.
	CodeInvalidInput = "invalid_input"
	// CodeResponseNotActive: the response does not sample (a generate:false warm-up).
	CodeResponseNotActive = "response_not_active"
	// CodeSuccessorFailed: no successor response can be created (the connection drains).
	CodeSuccessorFailed = "successor_creation_failed"
	// CodeTooManySteers: the response already holds MaxPendingSteers steers (sampler).
	CodeTooManySteers = "too_many_pending_steers"
)

// SteerParams is a decoded response.steer.
type SteerParams struct {
	// PreviousResponseID is the response to steer.
	PreviousResponseID string
	// Input is the steer's user messages (a string becomes one input_text message).
	Input []Item
	// RawInput is the input as sent (compacted), echoed by response.steer.failed.
	RawInput json.RawMessage
}

// DecodeSteer decodes a response.steer frame {type, previous_response_id, input, event_id}
// (event_id, a string or null, is ignored). Every error is invalid_input (400, param the
// field), the code response.steer.failed carries: a member the frame does not have
// ("Unknown parameter: 'x'.", as create's unknown_parameter words it); previous_response_id
// missing or not a string; event_id of another kind; input
// missing, empty, or holding anything but user messages of input_text, input_image and
// input_file parts. A frame of HeavyBytes or more waits for a heavy-work slot (CPUSlot); when
// ctx ends first the error is ClientClosed.
func DecodeSteer(ctx context.Context, data []byte) (SteerParams, *Error) {
	release, cerr := HeavySlot(ctx, len(data))
	defer release()
	if cerr != nil {
		return SteerParams{}, cerr
	}
	var sp SteerParams
	err := decodeText(data, "frame", true, func(d *dec) *Error {
		if d.kind() != '{' {
			return errSyntax
		}
		d.open()
		return d.frame(nil, func(key []byte) (err *Error) {
			switch string(key) {
			case "previous_response_id":
				sp.PreviousResponseID, err = d.strOrNull()
			case "input":
				v, o := d.sub()
				sp.RawInput = compactCopy(v)
				sp.Input, err = o.input()
				o.release()
			case "event_id":
				err = d.eventID()
			case "type":
				err = d.skipUnchecked() // the reader routed the frame on it
			default:
				err = errUnknown(string(key))
			}
			return err
		})
	})
	switch {
	case err != nil && err.Code == CodeInvalidJSON:
		return SteerParams{}, steerInput(err.Param, err.Message)
	case err != nil:
		return sp, steerInput(err.Param, err.Message)
	case sp.PreviousResponseID == "":
		return sp, steerInput("previous_response_id", "Missing required parameter: 'previous_response_id'.")
	case len(sp.Input) == 0:
		return sp, steerInput("input", "A steer needs input: a string or user messages.")
	}
	empty := true
	for i := range sp.Input {
		if !userMessage(&sp.Input[i]) {
			return sp, steerInput("input", "Steer input may only hold user messages with input_text, input_image or input_file content.")
		}
		empty = empty && blankMessage(&sp.Input[i])
	}
	if empty {
		return sp, steerInput("input", "A steer needs input: its messages hold no text, image or file.")
	}
	return sp, nil
}

// blankMessage reports a message whose parts are all input_text of white space only.
func blankMessage(it *Item) bool {
	for _, p := range it.Content {
		if p.Type != PartInputText || strings.TrimSpace(p.Text) != "" {
			return false
		}
	}
	return true
}

func userMessage(it *Item) bool {
	if it.Type != ItemMessage || it.Role != RoleUser || len(it.Content) == 0 {
		return false
	}
	for _, p := range it.Content {
		switch p.Type {
		case PartInputText, "input_image", "input_file":
		default:
			return false
		}
	}
	return true
}

func steerInput(param, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: CodeInvalidInput, Param: param, Message: msg}
}

// SteerRef returns the steer object of response.steer.accepted and .pending:
// {"id", "previous_response_id"}.
func SteerRef(id, previousResponseID string) json.RawMessage {
	b := append([]byte(`{"id":`), appendString(nil, id)...)
	b = append(b, `,"previous_response_id":`...)
	b = appendString(b, previousResponseID)
	return append(b, '}')
}

// MaxSteerEcho is the largest input SteerEcho echoes, in bytes; a larger one is left out.
const MaxSteerEcho = 64 << 10

// SteerEcho returns the steer object of response.steer.failed: {"previous_response_id",
// "input"} as sent (input left out past MaxSteerEcho bytes), and "id" when the steer got one.
func SteerEcho(id, previousResponseID string, input json.RawMessage) json.RawMessage {
	b := []byte(`{`)
	if id != "" {
		b = append(b, `"id":`...)
		b = appendString(b, id)
		b = append(b, ',')
	}
	b = append(b, `"previous_response_id":`...)
	b = appendString(b, previousResponseID)
	if len(input) > 0 && len(input) <= MaxSteerEcho {
		b = append(b, `,"input":`...)
		b = append(b, input...)
	}
	return append(b, '}')
}
