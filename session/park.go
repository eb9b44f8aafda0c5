package session

import (
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// This file parks suspended rollouts (Options.ParkAfter): a parked rollout holds no goroutine,
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
type parkingSink struct{ *coreSink }

// sinkFor returns the Sink a rollout of the registry entry h runs with: a parkingSink when
// rollouts park (Options.ParkAfter, a Model that can park) and the shape's sink can (the
// append shape's).
func (c *Conn) sinkFor(h *rollout, inner sampler.Sink, answers bool) sampler.Sink {
	cs := &coreSink{c: c, h: h, inner: inner, answers: answers}
	if _, ok := inner.(*appendSink); ok && c.opts.ParkAfter > 0 && sampler.CanPark(c.opts.Model) {
		return &parkingSink{cs}
	}
	return cs
}

// Parked implements sampler.ParkSink: the registry keeps the rollout's state instead of its
// goroutine. A rollout cancelled or drained while it parked, or parked while its connection
// closes, is continued at once to end as it would have.
func (s *parkingSink) Parked(p *sampler.ParkedRollout) {
	c, h := s.c, s.h
	v := &parkedRollout{Rollout: p, Owner: c.opts.Owner, Sink: s.inner.(*appendSink).park()}
	c.mu.Lock()
	defer c.mu.Unlock()
	h.parked, h.r = v, nil
	if m := c.opts.Metrics; m != nil {
		m.Parks.Add(1)
	}
	if d := p.Deadline; !d.IsZero() && (c.nextExpiry.IsZero() || d.Before(c.nextExpiry)) {
		c.nextExpiry = d
	}
	switch {
	case h.cancelled:
		if r, err := c.unparkLocked(h, true, nil); err == nil {
			r.Cancel(h.cancelWhy)
		}
	case c.closing:
		_, _ = c.unparkLocked(h, true, nil) // ends with the connection's context, as a live one
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
// for a park in flight, parkedLocked). Errors: those of unparkLocked.
func (c *Conn) liveLocked(h *rollout) (*sampler.Rollout, error) {
	c.parkedLocked(h)
	if h.parked != nil {
		return c.unparkLocked(h, false, nil)
	}
	return h.r, nil
}

// unparkLocked continues the parked rollout of h in a new goroutine (sampler.Unpark) and
// returns it: Suspended, or with in resumed by it. During Close only the rollout's own
// goroutine may (inClose: the connection still waits for it). Errors: shutting down (503)
// once the connection closes, the *protocol.Error of sampler.CheckOutputs for in (the rollout
// stays parked), server_error when the value does not unpark.
func (c *Conn) unparkLocked(h *rollout, inClose bool, in *sampler.Resume) (*sampler.Rollout, error) {
	if c.closing && !inClose {
		return nil, shuttingDownError()
	}
	p := h.parked
	inner := p.Sink.unpark(c)
	cfg := sampler.Config{Model: c.opts.Model, ConnID: c.id, Sink: c.sinkFor(h, inner, p.Rollout.SuspendOnAnswer), ParkAfter: c.opts.ParkAfter}
	r, err := sampler.Unpark(c.ctx, cfg, p.Rollout, in)
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
// context, as live ones).
func (c *Conn) unparkAllLocked() {
	for _, h := range c.reg {
		if h.parked != nil {
			_, _ = c.unparkLocked(h, true, nil)
		}
	}
}
