package session

import (
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/store"
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

// create starts a rollout for a response.create frame. Its errors are attributed to the
// create's lane (stream_id), except invalid_stream_id.
func (a *appendAdapter) create(p *protocol.CreateParams) error {
	lane := p.LaneOf() // every error but invalid_stream_id carries the lane
	if err := CheckFormat(p); err != nil {
		return protocol.InLane(err, lane)
	}
	if err := protocol.CheckCreate(p, protocol.AppendWebSocket); err != nil {
		return protocol.InLane(err, lane)
	}
	return protocol.InLane(a.start(p, lane), lane)
}

// start is create after the checks that cannot be attributed to a lane.
func (a *appendAdapter) start(p *protocol.CreateParams, lane string) error {
	input, err := a.c.ResolveRefs(p.Input)
	if err == nil {
		input, err = a.c.ExpandCompactions(input)
	}
	if err != nil {
		return err
	}
	p.Input = input
	if err := a.c.CheckModel(p); err != nil { // the backend sees the items it will get
		return err
	}
	var history []protocol.Item
	var cold *protocol.Continuation // a continuation by previous_response_id is always rebuilt
	if p.PreviousResponseID != nil && *p.PreviousResponseID != "" {
		h, fromStore, err := a.c.Lookup(*p.PreviousResponseID)
		if err != nil {
			return err
		}
		history, cold = h, &protocol.Continuation{Path: protocol.ContinuationCold, Reason: protocol.ColdNotSuspended}
		if fromStore {
			cold.Reason = protocol.ColdNotOnConnection
		}
	}
	if err := protocol.CheckContinuation(history, p.Input); err != nil {
		return err
	}
	id := protocol.NewID("resp")
	sink := &appendSink{c: a.c, resp: protocol.NewResponse(id, p, time.Now().Unix()), history: len(history), lane: lane, cold: cold}
	if cold != nil {
		a.c.LogCold(id, *p.PreviousResponseID, cold)
	}
	return a.c.Start(StartRequest{Key: id, Config: sampler.Config{
		ID:       id,
		Settings: sampler.SettingsFrom(p),
		History:  history,
		Input:    p.Input,
		Sink:     sink,
	}, SettingsBytes: SettingsBytes(p), Lane: lane})
}

// CheckModel runs the backend's validation of a create request (sampler.RequestChecker, e.g.
// the sim's "sim.*" metadata keys): an error holding a 400 *protocol.Error, or nil.
func (c *Conn) CheckModel(p *protocol.CreateParams) error {
	return sampler.CheckRequest(c.opts.Model, p)
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
	return s.c.Write(s.buf)
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
	if st := s.c.opts.Store; st != nil && final.Store && e.Status != protocol.ResponseFailed {
		r := &store.Response{Response: final, Owner: s.c.opts.Owner, Chain: e.Context,
			Input: protocol.WithIDs(rolloutInput(e.Context[min(s.history, len(e.Context)):], e.Output))}
		if err := st.Put(s.c.ctx, r); err != nil {
			final = protocol.Finish(s.resp, protocol.ResponseFailed, "", StoreFailed(), e.Output, e.Usage, now)
		}
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
