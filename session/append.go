package session

import (
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// ServeAppend runs the append shape (architecture §4) on c: it reads client frames until the
// peer goes away or the connection is drained, answers every bad frame with an error envelope,
// and closes c (stopping every rollout) before it returns. The returned error says why the read
// loop ended; it is nil after a drain.
func ServeAppend(c *Conn) error {
	defer c.Close()
	a := &appendAdapter{c: c}
	for {
		data, err := c.tr.Read(c.ctx)
		if err != nil {
			if stop, rerr := a.readError(err); stop {
				return rerr
			}
			continue
		}
		ev, perr := protocol.DecodeClientEvent(data)
		if perr != nil {
			_ = c.WriteError(perr)
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
	case errors.Is(err, ErrFrameTooLarge):
		_ = c.WriteError(frameTooLargeError(c.opts.maxFrame()))
		_ = c.tr.Close(websocket.StatusMessageTooBig, "frame too large")
		return true, err
	}
	if draining, _ := c.Draining(); draining {
		return true, nil
	}
	return true, err
}

func frameTooLargeError(max int64) *protocol.Error {
	return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeMessageTooLarge, "",
		"The frame exceeds the limit of %d bytes; the connection will be closed.", max)
}

type appendAdapter struct {
	c *Conn
}

func (a *appendAdapter) dispatch(ev *protocol.ClientEvent) *protocol.Error {
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
		"Event type '%s' is not supported on an append connection. Supported types are: 'response.create', 'response.append', 'response.cancel' and 'response.processed'.", ev.Type)
}

// create starts a rollout for a response.create frame.
func (a *appendAdapter) create(p *protocol.CreateParams) *protocol.Error {
	if err := checkUnsupported(p, true); err != nil {
		return err
	}
	var history []protocol.Item
	if p.PreviousResponseID != nil && *p.PreviousResponseID != "" {
		var err *protocol.Error
		if history, err = a.c.Lookup(*p.PreviousResponseID); err != nil {
			return err
		}
	}
	if err := CheckChainOutputs(history, p.Input); err != nil {
		return err
	}
	id := NewID("resp")
	sink := &appendSink{c: a.c, resp: NewResponse(id, p, time.Now().Unix())}
	return a.c.Start(StartRequest{Key: id, Config: sampler.Config{
		ID:       id,
		Settings: sampler.SettingsFrom(p),
		History:  history,
		Input:    p.Input,
		Sink:     sink,
	}})
}

// checkUnsupported rejects the create fields neither shape supports (background:true,
// stream_id) and, on the append shape, generate:false — all unsupported_parameter (§8, §9).
func checkUnsupported(p *protocol.CreateParams, appendShape bool) *protocol.Error {
	switch {
	case p.Background != nil && *p.Background:
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "background",
			"background:true is not supported over WebSocket.")
	case p.StreamID != nil:
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "stream_id",
			"stream_id (lanes) is not supported by this server: omit it to use the connection's single FIFO lane.")
	case appendShape && !p.Generates():
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "generate",
			"generate:false (warm-up) is a public-shape feature and is not supported on an append connection.")
	}
	return nil
}

// CheckChainOutputs rejects a function_call_output in input whose call_id names no
// function_call of history or of input before it: tool_call_not_found (400, param input).
func CheckChainOutputs(history, input []protocol.Item) *protocol.Error {
	var calls map[string]struct{}
	for i := range input {
		if input[i].Type != protocol.ItemFunctionCallOutput {
			continue
		}
		if calls == nil {
			calls = make(map[string]struct{})
			for _, list := range [][]protocol.Item{history, input} {
				for j := range list {
					if list[j].Type == protocol.ItemFunctionCall {
						calls[list[j].CallID] = struct{}{}
					}
				}
			}
		}
		if _, ok := calls[input[i].CallID]; !ok {
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeToolCallNotFound, "input",
				"No tool call found for function call output with call_id %s.", input[i].CallID)
		}
	}
	return nil
}

// appendSink turns a rollout's happenings into append-shape events: one sequence_number space
// for the whole rollout, response.done at each suspension, one terminal event. Its fields are
// owned by the rollout goroutine.
type appendSink struct {
	c       *Conn
	resp    protocol.Response
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
	_ = s.emit(&protocol.Event{Type: protocol.EventCreated, Response: &s.resp})
	_ = s.emit(&protocol.Event{Type: protocol.EventInProgress, Response: &s.resp})
}

func (s *appendSink) Event(ev *protocol.Event) error { return s.emit(ev) }

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
	final := Finish(s.resp, e.Status, e.Reason, e.Error, e.Output, e.Usage, time.Now().Unix())
	_ = s.emit(&protocol.Event{Type: TerminalEvent(e.Status), Response: &final})
}
