package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// This file parks suspended rollouts (Limits.ParkAfter): a parked rollout holds no goroutine,
// its whole state is one parkedRollout value in the registry, and the next append (or cancel,
// drain, suspend timeout, close) continues it in a new goroutine (sampler.Unpark), hot.

// parkedRollout is the whole state of a parked rollout: the sampler's and its shape's sink's.
// It holds no pointer into the server and encodes to JSON and back.
type parkedRollout struct {
	Rollout *sampler.ParkedRollout `json:"rollout"`
	// Owner is the API key of the connection that parked it ("" on an open server).
	Owner string `json:"owner"`
	// Sink is the append shape's sink: the Response and the next sequence_number.
	Sink appendParked `json:"sink"`
	// Shape, when set, is the state of another shape's sink (ParkableSink.ParkState, or
	// SharedParkSink.SharedParkState): the rollout continues with the sink the connection's
	// UnparkSink returns for it.
	Shape json.RawMessage `json:"shape,omitempty"`
	// Key and StoreID, for a rollout of another shape whose sink is a SharedParkSink, are its
	// registry key and the id the store keeps it under (the id its client continues it by);
	// StoreID is "" when it does not go to the store (the store flag). An append-shape
	// rollout is kept under its key, the Response id.
	Key     string `json:"key,omitempty"`
	StoreID string `json:"store_id,omitempty"`
}

// storeID returns the id the store keeps v, the parked rollout key, under: key for the append
// shape, StoreID ("" when it does not go there) for another shape.
func (v *parkedRollout) storeID(key string) string {
	if v.Shape != nil {
		return v.StoreID
	}
	return key
}

// lane returns the stream_id of v's rollout.
func (v *parkedRollout) lane() string {
	if v.Shape != nil {
		return v.Rollout.Lane
	}
	return v.Sink.Lane
}

// ParkableSink is an optional interface of a shape's Sink (Route.Sink) whose rollouts can park
// (Limits.ParkAfter) on a connection that has an UnparkSink (Conn.SetUnparkSink). ParkState
// returns the sink's whole state as JSON; it is called once, from the rollout's goroutine,
// when the rollout parks, and the sink is not used again.
type ParkableSink interface {
	sampler.Sink
	ParkState() json.RawMessage
}

// SharedParkSink is a ParkableSink whose parked rollouts go to the shared store
// (Options.Parker) as the append shape's of a reattaching client do: when they park
// (Limits.ParkAfter) and on a drain for server shutdown, keyed by owner, for the rest of
// their suspend timeout; any connection of the owner on an instance sharing the store claims
// one by its id (Conn.ClaimParked) and continues it, hot. On a connection with a Parker,
// SharedParkState is called instead of ParkState (once, from the rollout's goroutine): state
// is the sink's whole state as JSON, which also lets another connection adopt the rollout
// (AdoptParked); id is the store id a client continues the rollout by ("" when it cannot be
// continued: it then stays in memory only); stored is the store flag of the Response it
// would continue (store:false goes to the store only with Limits.ParkUnstored).
type SharedParkSink interface {
	ParkableSink
	SharedParkState() (id string, stored bool, state json.RawMessage)
}

// UnparkSink returns the Sink that continues, on its connection, the parked rollout key from
// the state its ParkableSink returned; latest is the rollout's latest Response (Conn.Latest,
// "" for none). It is called with the connection's lock held: it must not call the Conn, and
// looks up the Responses the connection keeps (Conn.PeekResponse) with kept instead. An error
// ends nothing: the continuation is refused (server_error) and the rollout stays parked.
type UnparkSink func(key, latest string, state json.RawMessage, kept func(id string) (value any, ok bool)) (sampler.Sink, error)

// SetUnparkSink lets the rollouts of a shape whose Sink is a ParkableSink park on c: f
// continues them. Call it before the first Start.
func (c *Conn) SetUnparkSink(f UnparkSink) {
	c.mu.Lock()
	c.unparkSink = f
	c.mu.Unlock()
}

// appendParked is the state of a parked rollout's appendSink.
type appendParked struct {
	Response protocol.Response      `json:"response"`
	History  int                    `json:"history"`
	Cold     *protocol.Continuation `json:"cold,omitempty"`
	Seq      int                    `json:"seq"` // the next sequence_number
	Started  bool                   `json:"started"`
	Lane     string                 `json:"lane,omitempty"`
}

// park returns the sink's state; the sink is not used again.
func (s *appendSink) park() appendParked {
	return appendParked{Response: s.resp, History: s.history, Cold: s.cold, Seq: s.seq, Started: s.started, Lane: s.lane}
}

// unpark returns the sink that continues p on c.
func (p *appendParked) unpark(c *Conn) *appendSink {
	return &appendSink{c: c, lane: p.Lane, resp: p.Response, history: p.History, cold: p.Cold, seq: p.Seq, started: p.Started}
}

// parkingSink is the coreSink of a rollout that can park: sampler.ParkSink.
type parkingSink struct {
	*coreSink
	shares bool // rollout.reattach when it started: its shape's parked state is for the store
}

// sharesShape reports whether the connection writes the parked rollouts of inner, another
// shape's sink, to the store: it has a Parker and an UnparkSink, and inner is a
// SharedParkSink.
func (c *Conn) sharesShape(inner sampler.Sink) bool {
	_, ok := inner.(SharedParkSink)
	return ok && c.parker != nil && c.unparkSink != nil
}

// sinkFor returns the Sink a rollout of the registry entry h runs with: a parkingSink when
// rollouts park (Limits.ParkAfter, a Model that can park) and the shape's sink can (the
// append shape's, or a ParkableSink on a connection with an UnparkSink). Called with c.mu
// held.
func (c *Conn) sinkFor(h *rollout, inner sampler.Sink, answers bool) sampler.Sink {
	cs := &coreSink{Sink: inner, c: c, h: h, answers: answers}
	if in, ok := inner.(*appendSink); ok {
		c.shareLocked(h, in.resp.Store)
	}
	if !sampler.CanPark(c.opts.Model) {
		return cs
	}
	switch in := inner.(type) {
	case *appendSink:
		h.reattach = c.reattachableLocked(in.resp.Store)
		h.parkable = c.opts.ParkAfter > 0 || h.reattach
	case ParkableSink:
		h.reattach = c.sharesShape(in)
		h.parkable = (c.opts.ParkAfter > 0 || h.reattach) && c.unparkSink != nil
	}
	if h.parkable {
		return &parkingSink{coreSink: cs, shares: h.reattach}
	}
	return cs
}

// parkState returns the parked value of h's rollout p, with its shape's sink state.
func (s *parkingSink) parkState(p *sampler.ParkedRollout) *parkedRollout {
	v := &parkedRollout{Rollout: p, Owner: s.c.opts.Owner}
	switch in := s.Sink.(type) {
	case *appendSink:
		v.Sink = in.park()
	case SharedParkSink:
		if !s.shares {
			v.Shape = in.ParkState()
			break
		}
		var stored bool
		v.StoreID, stored, v.Shape = in.SharedParkState()
		if !stored && !s.c.opts.ParkUnstored {
			v.StoreID = ""
		}
		v.Key = s.h.key
	case ParkableSink:
		v.Shape = in.ParkState()
	}
	return v
}

// shapeSink returns the Sink that continues the parked rollout p of h on c.
func (c *Conn) shapeSink(h *rollout, p *parkedRollout) (sampler.Sink, error) {
	if p.Shape == nil {
		return p.Sink.unpark(c), nil
	}
	if c.unparkSink == nil {
		return nil, fmt.Errorf("session: the connection's shape cannot continue a parked rollout of another shape")
	}
	return c.unparkSink(h.key, h.latest, p.Shape, func(id string) (any, bool) { return c.keptLocked(id, false) })
}

// Parked implements sampler.ParkSink: the registry keeps the rollout's state instead of its
// goroutine. A rollout that moves to the store on drain (rollout.reattach) is also written to
// the store here, before it counts as parked (shareParked), so that it outlives its
// connection and its instance. A rollout cancelled or drained while it parked, or parked while
// its connection closes, is continued at once to end as it would have (or, when the store has
// it, is left to the store as Close leaves it).
func (s *parkingSink) Parked(p *sampler.ParkedRollout) {
	c, h := s.c, s.h
	v := s.parkState(p)
	shared := c.shareParked(h, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	h.parked, h.r, h.inStore = v, nil, shared
	if m := c.opts.Metrics; m != nil {
		m.Parks.Add(1)
		switch {
		case h.pressured:
			m.PressureParks.Add(1)
		case h.parkAsked:
			m.ShutdownParks.Add(1)
		default:
			m.IdleParks.Add(1)
		}
	}
	h.pressured = false
	if d := p.Deadline; !d.IsZero() && (c.nextExpiry.IsZero() || d.Before(c.nextExpiry)) {
		c.nextExpiry = d
	}
	switch {
	case c.closing && h.inStore:
		c.forgetStoredLocked(h)
	case h.cancelled:
		if r, err := c.unparkLocked(h, true, nil); err == nil {
			h.parkCancel = r // its ending is the cancel's (cancelKey)
			r.Cancel(h.cancelWhy)
		}
	case c.closing:
		_, _ = c.unparkLocked(h, true, nil) // ends with the connection's context, as a live one
	case c.draining:
		c.signal() // the drain parks it to the store, or ends it
	}
}

// parkedLocked waits (c.mu released) while h's rollout is parking, until its value is in
// h.parked (or, cancelled or closing, its continuation in h.r).
func (c *Conn) parkedLocked(h *rollout) {
	for h.parked == nil && h.r.State() == sampler.Parked {
		r := h.r
		c.mu.Unlock()
		<-r.Done() // after ParkSink.Parked returned
		c.mu.Lock()
	}
}

// liveLocked returns the live rollout of h, continuing it first when it is parked (waiting
// for a park in flight, parkedLocked). Errors: those of unparkLocked; shutting down (503)
// while a drain parks it to the store.
func (c *Conn) liveLocked(h *rollout) (*sampler.Rollout, error) {
	c.parkedLocked(h) // c.mu is released meanwhile: h.moving is read after it
	if h.moving {
		return nil, shuttingDownError() // a drain is parking it to the store
	}
	if h.parked != nil {
		return c.unparkLocked(h, false, nil)
	}
	return h.r, nil
}

// unparkLocked continues the parked rollout of h in a new goroutine (sampler.Unpark) and
// returns it: Suspended, or with in resumed by it. During Close only the rollout's own
// goroutine may (inClose: the connection still waits for it). A rollout whose value is also in
// the store (rollout.inStore) is claimed back from there first (takeBackLocked). Errors:
// shutting down (503) once the connection closes, the *protocol.Error of sampler.CheckOutputs
// for in (the rollout stays parked), server_error when the value does not unpark, and those of
// takeBackLocked.
func (c *Conn) unparkLocked(h *rollout, inClose bool, in *sampler.Resume) (*sampler.Rollout, error) {
	if c.closing && !inClose {
		return nil, shuttingDownError()
	}
	p := h.parked
	tookBack := false
	if h.inStore {
		if err := c.takeBackLocked(h); err != nil {
			return nil, err
		}
		tookBack = !h.inStore
	}
	inner, err := c.shapeSink(h, p)
	var r *sampler.Rollout
	if err == nil {
		// SuspendTimeout times the suspensions after this one (p.Deadline times this one):
		// without it a resumed rollout would never time out, nor park to the store again.
		cfg := sampler.Config{Model: c.opts.Model, ConnID: c.id, Sink: c.sinkFor(h, inner, p.Rollout.SuspendOnAnswer),
			ParkAfter: c.opts.ParkAfter, SuspendTimeout: c.opts.SuspendTimeout, Budget: c.modelBudget()}
		r, err = sampler.Unpark(c.ctx, cfg, p.Rollout, in)
	}
	if err != nil && tookBack {
		c.putBackLocked(h) // it stays parked: in the store again too
	}
	if perr, ok := protocol.AsError(err); ok {
		return nil, perr
	}
	if err != nil {
		c.log.Error("a parked rollout does not unpark", "key", h.key, "err", err.Error())
		return nil, protocol.Errorf(500, protocol.CodeServerError, "", "The parked response %s could not be resumed.", h.key)
	}
	h.parked, h.r = nil, r
	if m := c.opts.Metrics; m != nil {
		m.Unparks.Add(1)
	}
	c.goroutines.Add(1)
	go func() {
		defer c.goroutines.Done()
		r.Run()
	}()
	return r, nil
}

// expireParked continues the parked rollouts whose suspension has timed out, so that they end
// (incomplete, idle_timeout) as live ones do. The watchdog calls it every tick; it scans the
// registry only once the earliest deadline has passed.
func (c *Conn) expireParked(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nextExpiry.IsZero() || now.Before(c.nextExpiry) || c.closing {
		return
	}
	c.nextExpiry = time.Time{}
	for _, h := range c.reg {
		if h.parked == nil {
			continue
		}
		d := h.parked.Rollout.Deadline
		switch {
		case d.IsZero():
		case !now.Before(d):
			_, _ = c.unparkLocked(h, false, nil)
		case c.nextExpiry.IsZero() || d.Before(c.nextExpiry):
			c.nextExpiry = d
		}
	}
}

// unparkAllLocked continues every parked rollout (Close: they then end with the connection's
// context, as live ones). One whose value is in the store too is left to the store: it
// outlives its connection until its suspend timeout, and its client may resume it on any
// instance (forgetStoredLocked).
func (c *Conn) unparkAllLocked() {
	for _, h := range c.reg {
		switch {
		case h.parked == nil:
		case h.inStore:
			c.forgetStoredLocked(h)
		default:
			_, _ = c.unparkLocked(h, true, nil)
		}
	}
}

// releaseLeftLocked gives back, at Close once every rollout goroutine has ended, what the
// entries left in the registry hold outside it (Close then releases the registry's bytes):
// each one's items leave Options.LiveItems, and one still parked, whose continuation
// unparkAllLocked could not start (a value its Model cannot resume: sampler.Unpark's
// errors), gives back its quota key's slot and the Metrics.Parked gauge, as a rollout that
// ends or is left to the store does.
func (c *Conn) releaseLeftLocked() {
	for _, h := range c.reg {
		c.unshareLocked(h)
		if h.parked != nil && !h.final {
			c.endParkedLocked(h)
		}
	}
}
