package compat

import (
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// Options configures the public shape. The zero value works.
type Options struct {
	// Store serves the stored-response routes of HTTP (GET and DELETE /v1/responses/{id},
	// input_items, and the chain of a compaction); nil means none. Creates resolve
	// previous_response_id and write store:true segments through the connection's
	// session.Options.Store (and its Owner and QuotaKey), which a server sets to the same store.
	Store session.Store
	// Counters, if set, count hot and cold continuations.
	Counters *Counters
}

// registry returns the shape's state on c. Ended segments are entries of c's registry,
// bounded by c's session.Limits.CacheResponses and CacheBytes.
func (o *Options) registry(c *session.Conn) *registry { return newRegistry(c) }

func (o *Options) counters() *Counters {
	if o.Counters == nil {
		o.Counters = new(Counters)
	}
	return o.Counters
}

// ServeWebSocket runs the public WebSocket shape on c: it
// reads client frames until the peer goes away or c is drained, answers every bad frame with
// an error envelope, and closes c before it returns. The returned error says why the read loop
// ended; it is nil after a drain.
func ServeWebSocket(c *session.Conn, opts Options) error {
	r := opts.registry(c)
	c.SetUnparkSink(r.unparkSink)
	return session.Serve(c, &wsHandler{c: c, r: r, counters: opts.counters()})
}

// wsHandler is the public WebSocket shape's session.Handler.
type wsHandler struct {
	c        *session.Conn
	r        *registry
	counters *Counters
}

// EventTypes implements session.Handler.
func (h *wsHandler) EventTypes() string { return protocol.PublicEventTypes }

// Handle implements session.Handler.
func (h *wsHandler) Handle(ev *protocol.ClientEvent) error {
	switch ev.Type {
	case protocol.EventCreate:
		_, err := h.r.create(ev.Create, &wsEmitter{c: h.c, lane: ev.Create.LaneOf()}, true, h.counters)
		return err
	case protocol.EventProcessed:
		return nil
	case protocol.EventSteer:
		h.steer(ev.Steer)
		return nil
	}
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnknownEventType, "type",
		"Event type '%s' is not supported on a public-shape connection (open the WebSocket with 'OpenAI-Beta: responses_append=v1' for the append shape). Supported types are: %s.", ev.Type, protocol.PublicEventTypes)
}

// wsEmitter writes one segment's events as WebSocket text frames, from the goroutine of the
// rollout that runs the segment.
type wsEmitter struct {
	c    *session.Conn
	lane string // stream_id carried by every event and error frame
	buf  []byte
}

func (w *wsEmitter) emit(ev *protocol.Event) error {
	ev.StreamID = w.lane
	w.buf = protocol.AppendEvent(w.buf[:0], ev)
	return w.c.WriteEvent(w.buf, ev.Type)
}

func (w *wsEmitter) errorFrame(e *protocol.Error) { _ = w.c.WriteError(protocol.InLane(e, w.lane)) }
