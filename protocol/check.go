package protocol

import "net/http"

// The client event types each shape serves, as listed in unknown_event_type messages.
const (
	AppendEventTypes = "'response.create', 'response.append', 'response.cancel' and 'response.processed'"
	PublicEventTypes = "'response.create', 'response.steer' and 'response.processed'"
)

// ForShape answers a decoding error: an unknown_event_type error lists only the event types
// of the connection's shape (types); other errors are returned unchanged.
func ForShape(ev *ClientEvent, e *Error, types string) *Error {
	if e.Code != CodeUnknownEventType {
		return e
	}
	return UnknownEventType(string(ev.Type), types)
}

// Where a create arrives: its shape and transport decide which fields it may carry.
type Where int

const (
	// AppendWebSocket is a response.create on an append-shape connection.
	AppendWebSocket Where = iota
	// PublicWebSocket is a response.create on a public-shape connection.
	PublicWebSocket
	// PublicHTTP is a POST /v1/responses body.
	PublicHTTP
)

// CheckCreate rejects what a create may not carry where it arrives, all
// unsupported_parameter (400) with the field as param: background:true on a WebSocket (both
// shapes; a background response runs detached from any connection and is followed over HTTP);
// generate:false on an append connection; generate and stream_id at all over HTTP. Over HTTP,
// background:true with store:false is invalid_value (400, param store): a background
// response is polled and resumed from the store. A stream_id
// on a WebSocket must pass CheckStreamID (invalid_stream_id). It also
// does not compile a text.format schema (that needs a JSON Schema library): callers run
// session.CheckFormat first. The backend's own checks are session.Conn.CheckModel.
func CheckCreate(p *CreateParams, where Where) error {
	switch {
	case p.Background != nil && *p.Background && where != PublicHTTP:
		return Errorf(http.StatusBadRequest, CodeUnsupportedParameter, "background",
			"background:true is not supported over WebSocket: create background responses with POST /v1/responses.")
	case p.Background != nil && *p.Background && !p.Stored():
		return Errorf(http.StatusBadRequest, CodeInvalidValue, "store",
			"background:true requires store:true: a background response is polled and resumed from the store.")
	case where == PublicHTTP && p.StreamID != nil:
		return Errorf(http.StatusBadRequest, CodeUnsupportedParameter, "stream_id",
			"stream_id is a WebSocket-only parameter (lanes of one WebSocket connection).")
	case p.StreamID != nil && where != PublicHTTP && CheckStreamID(p.StreamID) != nil:
		return CheckStreamID(p.StreamID)
	case where == AppendWebSocket && !p.Generates():
		return Errorf(http.StatusBadRequest, CodeUnsupportedParameter, "generate",
			"generate:false (warm-up) is a public-shape feature and is not supported on an append connection.")
	case where == PublicHTTP && p.Generate != nil:
		return Errorf(http.StatusBadRequest, CodeUnsupportedParameter, "generate",
			"generate is a WebSocket-only parameter.")
	}
	return nil
}

// CheckContinuation validates the input of a continuation of chain (by previous_response_id,
// both shapes): every function_call_output must name a function_call of chain or of input
// before it (else tool_call_not_found), no call may get two outputs (duplicate_tool_output),
// and every call chain leaves open must get one (missing_tool_output: "No tool output found
// for function call <call_id>."), even when input repeats that function_call. A call that input
// itself makes first is the client's own: it may stay open. All are 400 with param "input". A
// function_call of chain with status incomplete (cut short by response.steer, max_output_tokens
// or a full context window) is not open: it needs no output and takes none (tool_call_not_found,
// saying it was cut off). Other items are appended as given.
func CheckContinuation(chain, input []Item) error {
	const bad = http.StatusBadRequest
	// One table of flags per call_id (callTable): the chain is the whole history, so this
	// walk is the create's only cost that grows with it.
	const (
		open     = 1 << iota // a complete call or an output of the id was seen
		answered             // the last of them was an output
		cutOff               // an incomplete call of the id was seen
		listed               // the first of them was a call: the id is a candidate for pending
		ordered              // pending-order pass: the id's first complete call was met
	)
	calls := 0
	for i := range chain {
		if t := chain[i].Type; t == ItemFunctionCall || t == ItemFunctionCallOutput {
			calls++
		}
	}
	state := getCallTable(calls/2 + len(input))
	defer state.put()
	for i := range chain {
		switch chain[i].Type {
		case ItemFunctionCall:
			f := state.flags(chain[i].CallID)
			switch {
			case chain[i].Status == StatusIncomplete:
				*f |= cutOff
			case *f&open == 0:
				*f |= listed | open
			default:
				*f &^= answered
			}
		case ItemFunctionCallOutput:
			*state.flags(chain[i].CallID) |= open | answered
		}
	}
	// The calls chain leaves open, in the order of their first complete call.
	var pending []string
	for i := range chain {
		if chain[i].Type != ItemFunctionCall || chain[i].Status == StatusIncomplete {
			continue
		}
		if f := state.flags(chain[i].CallID); *f&listed != 0 && *f&ordered == 0 {
			*f |= ordered
			if *f&answered == 0 {
				pending = append(pending, chain[i].CallID)
			}
		}
	}
	for i := range input {
		it := &input[i]
		switch it.Type {
		case ItemFunctionCall:
			f := state.flags(it.CallID)
			*f = *f&^answered | open
		case ItemFunctionCallOutput:
			f := state.flags(it.CallID)
			switch {
			case *f&open == 0 && *f&cutOff != 0:
				return Errorf(bad, CodeToolCallNotFound, "input",
					"Function call %s was cut off before it was complete (status incomplete): it is not pending and takes no output.", it.CallID)
			case *f&open == 0:
				return Errorf(bad, CodeToolCallNotFound, "input",
					"No tool call found for function call output with call_id %s.", it.CallID)
			case *f&answered != 0:
				return Errorf(bad, CodeDuplicateToolOutput, "input",
					"Duplicate tool output for function call %s.", it.CallID)
			}
			*f |= answered
		}
	}
	// Only the calls chain left open are demanded: a call input makes first is a client-side
	// call the client answers later, but repeating a pending call of chain does not answer it.
	for _, id := range pending {
		if state.get(id)&answered == 0 {
			return Errorf(bad, CodeMissingToolOutput, "input",
				"No tool output found for function call %s.", id)
		}
	}
	return nil
}
