package session

import (
	"errors"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/store"
)

// ServeAppend runs the append shape (architecture §4) on c: it reads client frames until the
// peer goes away or the connection is drained, answers every bad frame with an error envelope,
// and closes c (stopping every rollout) before it returns. The returned error says why the read
// loop ended; it is nil after a drain.
func ServeAppend(c *Conn) error {
	defer c.Close()
	a := &appendAdapter{c: c}
	for {
		data, err := c.Transport().Read(c.ctx)
		if err != nil {
			if stop, rerr := a.readError(err); stop {
				return rerr
			}
			continue
		}
		ev, perr := protocol.DecodeClientEvent(data)
		if perr != nil {
			_ = c.WriteError(protocol.ForShape(&ev, perr, protocol.AppendEventTypes))
			continue
		}
		if e := a.dispatch(&ev); e != nil {
			_ = c.WriteError(e)
		}
	}
}

// readError answers a failed read; stop reports whether the read loop must end.
func (a *appendAdapter) readError(err error) (stop bool, _ error) {
	c := a.c
	switch {
	case errors.Is(err, ErrBinaryFrame):
		_ = c.WriteError(protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedFrame, "",
			"Binary frames are not supported: send each event as one JSON text frame."))
		return false, nil
	case errors.Is(err, ErrOverloaded):
		_ = c.WriteError(OverloadedError("the server's memory budget for frames being read is in use"))
		return false, nil
	case errors.Is(err, ErrFrameTooLarge):
		_ = c.CloseWith(FrameTooLargeError(c.opts.maxFrame()))
		return true, err
	}
	if draining, _ := c.Draining(); draining {
		return true, nil
	}
	return true, err
}

// FrameTooLargeError is the connection-fatal websocket_message_too_large error (413) for a
// frame over max bytes: its envelope is sent, then the connection closes with 1009
// (architecture §8; Conn.CloseWith).
func FrameTooLargeError(max int64) *protocol.ConnectionError {
	return &protocol.ConnectionError{Code: protocol.CloseMessageTooBig, Reason: "frame too large",
		Err: protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeMessageTooLarge, "",
			"The frame exceeds the limit of %d bytes; the connection will be closed.", max)}
}

type appendAdapter struct {
	c *Conn
}

func (a *appendAdapter) dispatch(ev *protocol.ClientEvent) error {
	switch ev.Type {
	case protocol.EventCreate:
		return a.create(ev.Create)
	case protocol.EventAppend:
		return a.c.Resume(ev.ResponseID, ev.Input)
	case protocol.EventCancel:
		return a.c.Cancel(ev.ResponseID, protocol.ReasonCancelled)
	case protocol.EventProcessed:
		return nil
	}
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnknownEventType, "type",
		"Event type '%s' is not supported on an append connection. Supported types are: %s.", ev.Type, protocol.AppendEventTypes)
}

// create starts a rollout for a response.create frame.
func (a *appendAdapter) create(p *protocol.CreateParams) error {
	if err := CheckFormat(p); err != nil {
		return err
	}
	if err := protocol.CheckCreate(p, protocol.AppendWebSocket); err != nil {
		return err
	}
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
		var err error
		if history, err = a.c.Lookup(*p.PreviousResponseID); err != nil {
			return err
		}
	}
	if err := protocol.CheckContinuation(history, p.Input); err != nil {
		return err
	}
	id := protocol.NewID("resp")
	sink := &appendSink{c: a.c, resp: protocol.NewResponse(id, p, time.Now().Unix()), history: len(history)}
	return a.c.Start(StartRequest{Key: id, Config: sampler.Config{
		ID:       id,
		Settings: sampler.SettingsFrom(p),
		History:  history,
		Input:    p.Input,
		Sink:     sink,
	}, SettingsBytes: SettingsBytes(p)})
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
	resp    protocol.Response
	history int // items of the chain before this rollout's input
	seq     int
	buf     []byte
	started bool
}

func (s *appendSink) emit(ev *protocol.Event) error {
	ev.SequenceNumber = s.seq
	s.seq++
	s.buf = protocol.AppendEvent(s.buf[:0], ev)
	return s.c.Write(s.buf)
}

func (s *appendSink) Started() {
	s.started = true
	_ = s.emit(new(protocol.Created(&s.resp)))
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
