package protocol

import "encoding/json"

// EventType is the "type" of a server event (server → client); the Event* constants are its
// values. Client events have their own type, ClientEventType.
type EventType string

// Server event types (server → client). Every event except error carries sequence_number.
const (
	// EventCreated: {response} with status in_progress, output [], usage null. First event.
	EventCreated EventType = "response.created"
	// EventInProgress: {response}, right after response.created.
	EventInProgress EventType = "response.in_progress"
	// EventOutputItemAdded: {output_index, item} with the partial item (status in_progress).
	EventOutputItemAdded EventType = "response.output_item.added"
	// EventOutputItemDone: {output_index, item} with the final item.
	EventOutputItemDone EventType = "response.output_item.done"
	// EventContentPartAdded: {item_id, output_index, content_index, part} with an empty part.
	EventContentPartAdded EventType = "response.content_part.added"
	// EventContentPartDone: {item_id, output_index, content_index, part} with the final part.
	EventContentPartDone EventType = "response.content_part.done"
	// EventOutputTextDelta: {item_id, output_index, content_index, delta, logprobs:[]}.
	EventOutputTextDelta EventType = "response.output_text.delta"
	// EventOutputTextDone: {item_id, output_index, content_index, text, logprobs:[]}.
	EventOutputTextDone EventType = "response.output_text.done"
	// EventArgumentsDelta: {item_id, output_index, delta} — a fragment of a call's arguments.
	EventArgumentsDelta EventType = "response.function_call_arguments.delta"
	// EventArgumentsDone: {item_id, output_index, name, arguments}.
	EventArgumentsDone EventType = "response.function_call_arguments.done"
	// EventCompleted: {response} with status completed. Terminal.
	EventCompleted EventType = "response.completed"
	// EventIncomplete: {response} with status incomplete and incomplete_details. Terminal.
	EventIncomplete EventType = "response.incomplete"
	// EventFailed: {response} with status failed and error {code, message}. Terminal.
	EventFailed EventType = "response.failed"
	// EventDone (append shape only): {response_id, pending_call_ids, output, usage} — the rollout
	// suspended; output holds only the items since the previous suspension, usage is cumulative.
	EventDone EventType = "response.done"
	// EventSteerFailed: {steer, error} in answer to response.steer (public shape).
	EventSteerFailed EventType = "response.steer.failed"
	// EventError: {status, error {type, code, message, param}}; no sequence_number.
	EventError EventType = "error"
)

// EndsTurn reports whether t ends a turn: after it the server waits for its client
// (response.done, the append shape's suspension) or the response is over (response.completed,
// response.incomplete, response.failed).
func (t EventType) EndsTurn() bool {
	switch t {
	case EventDone, EventCompleted, EventIncomplete, EventFailed:
		return true
	}
	return false
}

// Event is one server event. Type selects the fields that are encoded; see the constants for
// each event's payload. Build it with the constructor of its type (Created, InProgress,
// Terminal, OutputItemAdded, …, SteerFailed, ErrorEvent in events.go), which sets only the
// fields that type encodes. SequenceNumber is assigned by the shape adapter (per rollout in the
// append shape, per Response in the public shape); OutputIndex likewise.
type Event struct {
	Type           EventType
	SequenceNumber int
	// StreamID is the lane of the response the event belongs to: encoded on
	// every event type when not "" (the default lane carries none).
	StreamID string
	Response *Response // created, in_progress, completed, incomplete, failed
	// Settings, when set, holds the encoded settings of Response (EncodeSettings of Response, of
	// the Response it was finished from, or of one with an equal settings key): AppendEvent
	// copies those members from it instead of encoding them again. The bytes are the same.
	Settings *Settings
	// Continuation is encoded on response.created when set (append shape: a cold turn).
	Continuation *Continuation
	OutputIndex  int          // item and delta events
	ContentIndex int          // content part and text events
	ItemID       string       // delta and done events below the item level
	Item         *Item        // output_item.added / .done
	Part         *ContentPart // content_part.added / .done
	Delta        string       // *.delta
	Text         string       // output_text.done
	Name         string       // function_call_arguments.done
	Arguments    string       // function_call_arguments.done

	// response.done (append shape)
	ResponseID     string
	PendingCallIDs []string
	Output         []Item
	Usage          *Usage

	// Steer is the steer object echoed by response.steer.failed (encoded verbatim, compacted;
	// {} when nil). The public adapter passes the request's {previous_response_id, input} or
	// the whole ClientEvent.Steer frame.
	Steer json.RawMessage
	// Error is the error of an "error" event (encoded by AppendError) and of
	// response.steer.failed ({type, code, message}).
	Error *Error
}
