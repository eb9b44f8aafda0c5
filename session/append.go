package session

import (
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// ServeAppend runs the append shape on c through Serve: it reads client
// frames until the peer goes away or the connection is drained, answers every bad frame with an
// error envelope, and closes c (stopping every rollout) before it returns. The returned error
// says why the read loop ended; it is nil after a drain.
func ServeAppend(c *Conn) error { return Serve(c, &appendAdapter{c: c}) }

// appendAdapter is the append shape's Handler.
type appendAdapter struct {
	c *Conn
}

// EventTypes implements Handler.
func (a *appendAdapter) EventTypes() string { return protocol.AppendEventTypes }

// Handle implements Handler.
func (a *appendAdapter) Handle(ev *protocol.ClientEvent) error {
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
		"Event type '%s' is not supported on an append connection. Supported types are: %s.", ev.Type, protocol.AppendEventTypes)
}

// create starts a rollout for a response.create frame (Conn.Create with the append shape).
func (a *appendAdapter) create(p *protocol.CreateParams) error { return a.c.Create(p, a) }

// Where implements Shape.
func (a *appendAdapter) Where() protocol.Where { return protocol.AppendWebSocket }

// Parent implements Shape: a rollout of this connection, which must have ended
// (response_in_progress, 409, otherwise: continue it with response.append).
func (a *appendAdapter) Parent(cr *Create) ([]protocol.Item, bool, error) {
	items, ended, ok := a.c.Chain(cr.Parent)
	if ok && !ended {
		return nil, false, parentInProgress(cr.Parent)
	}
	return items, ok, nil
}

// Rejected implements Shape: the parent stays.
func (a *appendAdapter) Rejected(*Create) {}

// Route implements Shape: a continuation by previous_response_id is always rebuilt on a new
// rollout (cold; not_suspended when the parent is on this connection).
func (a *appendAdapter) Route(cr *Create) Route {
	if cr.Parent != "" && cr.Cold == nil {
		cr.Cold = cold(protocol.ColdNotSuspended)
	}
	return Route{Sink: &appendSink{c: a.c, resp: cr.Response, history: len(cr.History), lane: cr.Lane, cold: cr.Cold}}
}

// appendSink turns a rollout's happenings into append-shape events: one sequence_number space
// for the whole rollout, response.done at each suspension, one terminal event. Its fields are
// owned by the rollout goroutine.
type appendSink struct {
	c       *Conn
	lane    string // stream_id carried by every event
	resp    protocol.Response
	history int // items of the chain before this rollout's input
	// cold, when the create continued a previous_response_id, is encoded on response.created
	cold    *protocol.Continuation
	seq     int
	buf     []byte
	started bool
}

func (s *appendSink) emit(ev *protocol.Event) error {
	ev.SequenceNumber = s.seq
	ev.StreamID = s.lane
	s.seq++
	s.buf = protocol.AppendEvent(s.buf[:0], ev)
	return s.c.WriteEvent(s.buf, ev.Type)
}

func (s *appendSink) Started() {
	s.started = true
	_ = s.emit(new(protocol.CreatedContinued(&s.resp, s.cold)))
	_ = s.emit(new(protocol.InProgress(&s.resp)))
}

func (s *appendSink) Event(ev *protocol.Event) error { return s.emit(ev) }

// KeepAlive implements sampler.KeepAliver: a repeated response.in_progress with the next
// sequence_number (docs/append-protocol.md, keepalive).
func (s *appendSink) KeepAlive() bool {
	return s.started && s.emit(new(protocol.InProgress(&s.resp))) == nil
}

func (s *appendSink) Suspended(sp sampler.Suspension) {
	usage := sp.Usage
	output := sp.Output
	if output == nil {
		output = []protocol.Item{}
	}
	_ = s.emit(new(protocol.Done(s.resp.ID, sp.PendingCallIDs, output, &usage)))
}

func (s *appendSink) Ended(e sampler.Ending) {
	if !s.started {
		s.Started()
	}
	now := time.Now().Unix()
	final := protocol.Finish(s.resp, e.Status, e.Reason, e.Error, e.Output, e.Usage, now)
	if !s.c.Persist(&final, rolloutInput(e.Context[min(s.history, len(e.Context)):], e.Output), e.Context) {
		final = protocol.Finish(s.resp, protocol.ResponseFailed, "", StoreFailed(), e.Output, e.Usage, now)
	}
	_ = s.emit(new(protocol.Terminal(&final)))
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
