package session

import (
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/store"
)

// ServeAppend runs the append shape (architecture §4) on c through Serve: it reads client
// frames until the peer goes away or the connection is drained, answers every bad frame with an
// error envelope, and closes c (stopping every rollout) before it returns. The returned error
// says why the read loop ended; it is nil after a drain.
func ServeAppend(c *Conn) error { return Serve(c, &appendAdapter{c: c}) }

// appendAdapter is the append shape's Handler.
type appendAdapter struct {
	c *Conn
}

// EventTypes implements Handler.
func (a *appendAdapter) EventTypes() string { return AppendEventTypes }

// Handle implements Handler.
func (a *appendAdapter) Handle(ev *protocol.ClientEvent) *protocol.Error {
	switch ev.Type {
	case protocol.EventCreate:
		return a.create(ev.Create)
	case protocol.EventAppend:
		return protocol.InLane(a.c.Resume(ev.ResponseID, ev.Input), a.c.laneOf(ev.ResponseID))
	case protocol.EventCancel:
		return protocol.InLane(a.c.Cancel(ev.ResponseID, protocol.ReasonCancelled), a.c.laneOf(ev.ResponseID))
	case protocol.EventProcessed:
		return nil
	}
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnknownEventType, "type",
		"Event type '%s' is not supported on an append connection. Supported types are: %s.", ev.Type, AppendEventTypes)
}

// The client event types each shape serves, as listed in unknown_event_type messages.
const (
	AppendEventTypes = "'response.create', 'response.append', 'response.cancel' and 'response.processed'"
	PublicEventTypes = "'response.create', 'response.steer' and 'response.processed'"
)

// ForShape answers a decoding error: an unknown_event_type error lists only the event types
// of the connection's shape (types); other errors are returned unchanged.
func ForShape(ev *protocol.ClientEvent, e *protocol.Error, types string) *protocol.Error {
	if e.Code != protocol.CodeUnknownEventType {
		return e
	}
	return protocol.UnknownEventType(ev.Type, types)
}

// create starts a rollout for a response.create frame. Its errors are attributed to the
// create's lane (stream_id), except invalid_stream_id.
func (a *appendAdapter) create(p *protocol.CreateParams) *protocol.Error {
	if err := CheckCreate(p, AppendWebSocket); err != nil {
		return err
	}
	lane := p.Lane()
	return protocol.InLane(a.start(p, lane), lane)
}

// start is create after the checks that cannot be attributed to a lane.
func (a *appendAdapter) start(p *protocol.CreateParams, lane string) *protocol.Error {
	input, err := a.c.ResolveRefs(p.Input)
	if err == nil {
		input, err = ExpandCompactions(input)
	}
	if err != nil {
		return err
	}
	p.Input = input
	if err := a.c.CheckModel(p); err != nil { // the backend sees the items it will get
		return err
	}
	var history []protocol.Item
	if p.PreviousResponseID != nil && *p.PreviousResponseID != "" {
		var err *protocol.Error
		if history, err = a.c.Lookup(*p.PreviousResponseID); err != nil {
			return err
		}
	}
	if err := CheckContinuation(history, p.Input); err != nil {
		return err
	}
	id := NewID("resp")
	sink := &appendSink{c: a.c, resp: NewResponse(id, p, time.Now().Unix()), history: len(history), lane: lane}
	return a.c.Start(StartRequest{Key: id, Config: sampler.Config{
		ID:       id,
		Settings: sampler.SettingsFrom(p),
		History:  history,
		Input:    p.Input,
		Sink:     sink,
	}, SettingsBytes: SettingsBytes(p), Lane: lane})
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

// CheckCreate rejects what a create may not carry where it arrives (architecture §8, §9), all
// unsupported_parameter (400) with the field as param: background:true everywhere;
// generate:false on an append connection; generate and stream_id at all over HTTP. A stream_id
// on a WebSocket must pass protocol.CheckStreamID (invalid_stream_id). It also rejects a
// text.format schema that does not compile (CheckFormat). The backend's own checks are
// Conn.CheckModel.
func CheckCreate(p *protocol.CreateParams, where Where) *protocol.Error {
	if err := CheckFormat(p); err != nil {
		return err
	}
	switch {
	case p.Background != nil && *p.Background:
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "background",
			"background:true is not supported by this server.")
	case where == PublicHTTP && p.StreamID != nil:
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "stream_id",
			"stream_id is a WebSocket-only parameter (lanes of one WebSocket connection).")
	case p.StreamID != nil:
		return protocol.CheckStreamID(p.StreamID)
	case where == AppendWebSocket && !p.Generates():
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "generate",
			"generate:false (warm-up) is a public-shape feature and is not supported on an append connection.")
	case where == PublicHTTP && p.Generate != nil:
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "generate",
			"generate is a WebSocket-only parameter.")
	}
	return nil
}

// CheckModel runs the backend's validation of a create request (sampler.RequestChecker, e.g.
// the sim's "sim.*" metadata keys): a 400 *protocol.Error, or nil.
func (c *Conn) CheckModel(p *protocol.CreateParams) *protocol.Error {
	return sampler.CheckRequest(c.opts.Model, p)
}

// CheckContinuation validates the input of a continuation of chain (by previous_response_id,
// both shapes): every function_call_output must name a function_call of chain or of input
// before it (else tool_call_not_found), no call may get two outputs (duplicate_tool_output),
// and every call chain leaves open must get one (missing_tool_output: "No tool output found
// for function call <call_id>."). All are 400 with param "input" (architecture §8). A
// function_call of chain with status incomplete (cut short by response.steer) is not open: it
// needs no output. Other items are appended as given.
func CheckContinuation(chain, input []protocol.Item) *protocol.Error {
	const bad = http.StatusBadRequest
	open := map[string]bool{} // call_id → answered
	var order []string
	for i := range chain {
		switch chain[i].Type {
		case protocol.ItemFunctionCall:
			if chain[i].Status == protocol.StatusIncomplete {
				continue
			}
			if _, seen := open[chain[i].CallID]; !seen {
				order = append(order, chain[i].CallID)
			}
			open[chain[i].CallID] = false
		case protocol.ItemFunctionCallOutput:
			open[chain[i].CallID] = true
		}
	}
	var pending []string
	for _, id := range order {
		if !open[id] {
			pending = append(pending, id)
		}
	}
	for i := range input {
		it := &input[i]
		switch it.Type {
		case protocol.ItemFunctionCall:
			if _, seen := open[it.CallID]; !seen {
				pending = append(pending, it.CallID)
			}
			open[it.CallID] = false
		case protocol.ItemFunctionCallOutput:
			answered, ok := open[it.CallID]
			switch {
			case !ok:
				return protocol.Errorf(bad, protocol.CodeToolCallNotFound, "input",
					"No tool call found for function call output with call_id %s.", it.CallID)
			case answered:
				return protocol.Errorf(bad, protocol.CodeDuplicateToolOutput, "input",
					"Duplicate tool output for function call %s.", it.CallID)
			}
			open[it.CallID] = true
		}
	}
	for _, id := range pending {
		if !open[id] && !calledIn(input, id) {
			return protocol.Errorf(bad, protocol.CodeMissingToolOutput, "input",
				"No tool output found for function call %s.", id)
		}
	}
	return nil
}

// calledIn reports whether input itself makes the call id (a client-side call the client
// will answer later is not this server's to demand).
func calledIn(input []protocol.Item, id string) bool {
	for i := range input {
		if input[i].Type == protocol.ItemFunctionCall && input[i].CallID == id {
			return true
		}
	}
	return false
}

// appendSink turns a rollout's happenings into append-shape events: one sequence_number space
// for the whole rollout, response.done at each suspension, one terminal event. Its fields are
// owned by the rollout goroutine.
type appendSink struct {
	c       *Conn
	lane    string // stream_id carried by every event
	resp    protocol.Response
	history int // items of the chain before this rollout's input
	seq     int
	buf     []byte
	started bool
}

func (s *appendSink) emit(ev *protocol.Event) error {
	ev.SequenceNumber = s.seq
	ev.StreamID = s.lane
	s.seq++
	s.buf = protocol.AppendEvent(s.buf[:0], ev)
	return s.c.Write(s.buf)
}

func (s *appendSink) Started() {
	s.started = true
	_ = s.emit(&protocol.Event{Type: protocol.EventCreated, Response: &s.resp})
	_ = s.emit(&protocol.Event{Type: protocol.EventInProgress, Response: &s.resp})
}

func (s *appendSink) Event(ev *protocol.Event) error { return s.emit(ev) }

// KeepAlive implements sampler.KeepAliver: a repeated response.in_progress with the next
// sequence_number (docs/append-protocol.md, keepalive).
func (s *appendSink) KeepAlive() bool {
	return s.started && s.emit(&protocol.Event{Type: protocol.EventInProgress, Response: &s.resp}) == nil
}

func (s *appendSink) Suspended(sp sampler.Suspension) {
	usage := sp.Usage
	output := sp.Output
	if output == nil {
		output = []protocol.Item{}
	}
	_ = s.emit(&protocol.Event{Type: protocol.EventDone, ResponseID: s.resp.ID,
		PendingCallIDs: sp.PendingCallIDs, Output: output, Usage: &usage})
}

func (s *appendSink) Ended(e sampler.Ending) {
	if !s.started {
		s.Started()
	}
	now := time.Now().Unix()
	final := Finish(s.resp, e.Status, e.Reason, e.Error, e.Output, e.Usage, now)
	if st := s.c.opts.Store; st != nil && final.Store && e.Status != protocol.ResponseFailed {
		r := &store.Response{Response: final, Owner: s.c.opts.Owner, Chain: e.Context,
			Input: WithIDs(rolloutInput(e.Context[min(s.history, len(e.Context)):], e.Output))}
		if err := st.Put(s.c.ctx, r); err != nil {
			final = Finish(s.resp, protocol.ResponseFailed, "", StoreFailed(), e.Output, e.Usage, now)
		}
	}
	_ = s.emit(&protocol.Event{Type: TerminalEvent(final.Status), Response: &final})
}

// rolloutInput returns the items of ctx that are not model output: the rollout's inputs.
func rolloutInput(ctx, output []protocol.Item) []protocol.Item {
	out := make(map[string]bool, len(output))
	for i := range output {
		out[output[i].ID] = true
	}
	input := make([]protocol.Item, 0, len(ctx)-len(output))
	for i := range ctx {
		if ctx[i].ID == "" || !out[ctx[i].ID] {
			input = append(input, ctx[i])
		}
	}
	return input
}
