package protocol

import "encoding/json"

// The constructors below build every server Event with exactly the fields its type encodes
// (see the Event* constants); code outside this package builds events only with them.
// SequenceNumber is left 0: the shape adapter assigns it (and may renumber OutputIndex).
// They return values, so an emitter can reuse one Event without allocating.

// Created is response.created carrying resp (status in_progress).
func Created(resp *Response) Event { return Event{Type: EventCreated, Response: resp} }

// CreatedContinued is response.created carrying resp and, when c is not nil, the
// "continuation" member saying why a continuation was rebuilt (append shape).
func CreatedContinued(resp *Response, c *Continuation) Event {
	return Event{Type: EventCreated, Response: resp, Continuation: c}
}

// InProgress is response.in_progress carrying resp; also the append shape's keepalive.
func InProgress(resp *Response) Event { return Event{Type: EventInProgress, Response: resp} }

// Terminal is the event that ends resp: response.completed, response.failed or
// response.incomplete by resp.Status (TerminalEvent).
func Terminal(resp *Response) Event {
	return Event{Type: TerminalEvent(resp.Status), Response: resp}
}

// OutputItemAdded is response.output_item.added: the partial item (status in_progress) at
// output index idx.
func OutputItemAdded(idx int, item *Item) Event {
	return Event{Type: EventOutputItemAdded, OutputIndex: idx, Item: item}
}

// OutputItemDone is response.output_item.done: the final item at output index idx.
func OutputItemDone(idx int, item *Item) Event {
	return Event{Type: EventOutputItemDone, OutputIndex: idx, Item: item}
}

// ContentPartAdded is response.content_part.added: the empty part at content index part of
// item itemID at output index idx.
func ContentPartAdded(idx, partIdx int, itemID string, part *ContentPart) Event {
	return Event{Type: EventContentPartAdded, OutputIndex: idx, ContentIndex: partIdx, ItemID: itemID, Part: part}
}

// ContentPartDone is response.content_part.done: the final part.
func ContentPartDone(idx, partIdx int, itemID string, part *ContentPart) Event {
	return Event{Type: EventContentPartDone, OutputIndex: idx, ContentIndex: partIdx, ItemID: itemID, Part: part}
}

// OutputTextDelta is response.output_text.delta: a fragment of the text of content part
// partIdx of message itemID at output index idx.
func OutputTextDelta(idx, partIdx int, itemID, delta string) Event {
	return Event{Type: EventOutputTextDelta, OutputIndex: idx, ContentIndex: partIdx, ItemID: itemID, Delta: delta}
}

// OutputTextDone is response.output_text.done: the whole text of the content part.
func OutputTextDone(idx, partIdx int, itemID, text string) Event {
	return Event{Type: EventOutputTextDone, OutputIndex: idx, ContentIndex: partIdx, ItemID: itemID, Text: text}
}

// ArgumentsDelta is response.function_call_arguments.delta: a fragment of the arguments of
// function_call itemID at output index idx.
func ArgumentsDelta(idx int, itemID, delta string) Event {
	return Event{Type: EventArgumentsDelta, OutputIndex: idx, ItemID: itemID, Delta: delta}
}

// ArgumentsDone is response.function_call_arguments.done: the call's name and whole
// arguments.
func ArgumentsDone(idx int, itemID, name, args string) Event {
	return Event{Type: EventArgumentsDone, OutputIndex: idx, ItemID: itemID, Name: name, Arguments: args}
}

// Done is the append shape's response.done: rollout responseID suspended waiting for
// pendingCallIDs; output holds the items since the previous suspension (nil encodes []) and
// usage is cumulative.
func Done(responseID string, pendingCallIDs []string, output []Item, usage *Usage) Event {
	return Event{Type: EventDone, ResponseID: responseID, PendingCallIDs: pendingCallIDs, Output: output, Usage: usage}
}

// SteerFailed is response.steer.failed (public shape): steer is the steer object echoed
// verbatim ({} when empty), e its {type, code, message}.
func SteerFailed(steer json.RawMessage, e *Error) Event {
	return Event{Type: EventSteerFailed, Steer: steer, Error: e}
}

// SteerAccepted is response.steer.accepted: steer is the steer object {id,
// previous_response_id} (SteerRef).
func SteerAccepted(steer json.RawMessage) Event {
	return Event{Type: EventSteerAccepted, Steer: steer}
}

// SteerPending is response.steer.pending: reason waiting_for_required_input, required_input
// one function_call_output stub per call in callIDs, steer the steer object (SteerRef).
func SteerPending(callIDs []string, steer json.RawMessage) Event {
	return Event{Type: EventSteerPending, PendingCallIDs: callIDs, Steer: steer}
}

// ErrorEvent is an "error" event carrying e (encoded as the error envelope, no
// sequence_number).
func ErrorEvent(e *Error) Event { return Event{Type: EventError, Error: e} }
