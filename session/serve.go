package session

import (
	"errors"
	"net/http"

	"github.com/tetherd/tether/protocol"
)

// Handler is a shape adapter: it answers the decoded client events of one
// connection. Serve owns everything else about reading.
type Handler interface {
	// Handle answers one decoded client event. A non-nil error is sent as an error envelope;
	// a request-scoped one (*protocol.Error) keeps the connection reading, a
	// *protocol.ConnectionError closes it (Conn.CloseWith) and ends Serve.
	Handle(ev *protocol.ClientEvent) error
	// EventTypes lists the client event types the shape serves, as quoted in
	// unknown_event_type messages (AppendEventTypes, PublicEventTypes).
	EventTypes() string
}

// Serve is a connection's one read loop, for both shapes: it reads frames from c's transport
// until the peer goes away or c is drained, answers binary frames (unsupported_frame), frames
// over the budget (server_overloaded) and undecodable frames with an error envelope and keeps
// the connection usable, answers an oversize frame with websocket_message_too_large and closes
// with 1009, and hands every decoded event to h. A large frame waits for a heavy-work slot
// (protocol.CPUSlot) until the connection closes, and is then dropped undecoded. It closes c
// (stopping every rollout) before it returns. The error says why the loop ended: nil after a
// drain, the transport's error otherwise.
func Serve(c *Conn, h Handler) error {
	defer c.Close()
	for {
		data, err := c.tr.Read(c.ctx)
		if err != nil {
			if stop, rerr := c.readError(err); stop {
				return rerr
			}
			continue
		}
		ev, perr := protocol.DecodeClientEvent(c.ctx, data)
		if perr != nil {
			if perr.Code == protocol.CodeClientClosed {
				continue // the connection is closing: its next read ends the loop
			}
			var e error = protocol.ForShape(&ev, perr, h.EventTypes())
			if ev.Type == protocol.EventCreate { // a create's error carries its lane
				e = protocol.InLane(e, protocol.StreamIDOf(c.ctx, data))
			}
			_ = c.WriteError(e)
			continue
		}
		if e := h.Handle(&ev); e != nil {
			if ce, ok := protocol.AsConnectionError(e); ok {
				_ = c.CloseWith(ce)
				return ce
			}
			_ = c.WriteError(e)
		}
	}
}

// readError answers a failed read; stop reports whether the read loop must end.
func (c *Conn) readError(err error) (stop bool, _ error) {
	switch {
	case errors.Is(err, ErrBinaryFrame):
		_ = c.WriteError(protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedFrame, "",
			"Binary frames are not supported: send each event as one JSON text frame."))
		return false, nil
	case errors.Is(err, ErrOverloaded):
		_ = c.WriteError(BudgetFullError("this frame"))
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
// (Conn.CloseWith).
func FrameTooLargeError(max int64) *protocol.ConnectionError {
	return &protocol.ConnectionError{Code: protocol.CloseMessageTooBig, Reason: "frame too large",
		Err: protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeMessageTooLarge, "",
			"The frame exceeds the limit of %d bytes; the connection will be closed.", max)}
}
