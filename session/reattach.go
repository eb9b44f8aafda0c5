package session

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// This file moves parked rollouts between instances through a shared store (store.Parker):
// a drain parks a reattaching connection's suspended append-shape rollouts to the store (with
// a response.parked event each) instead of ending them, and an append or cancel naming a
// Response that is not on its connection claims it from the store and continues it there, hot.

// EventParked is the last event a rollout sends on a connection that drains when it has been
// parked to the shared store: {response_id, sequence_number[, stream_id]}. A response.append
// naming it on any connection to an instance sharing the store resumes it, the next
// sequence_number following this one.
const EventParked protocol.EventType = "response.parked"

// errNotHere: the key is not in the connection's registry (Resume and Cancel then try the
// store).
var errNotHere = errors.New("session: not on this connection")

// errNotShared: the parked rollout of another shape has no store id (SharedParkSink): it is
// kept in memory only.
var errNotShared = errors.New("session: this parked rollout does not go to the store")

// reattachableLocked reports whether a rollout of a Response with store stored moves to the
// store on drain (Options.Reattach, a store.Parker, store:true or Limits.ParkUnstored).
func (c *Conn) reattachableLocked(stored bool) bool {
	return c.parker != nil && c.opts.Reattach && (stored || c.opts.ParkUnstored)
}

// parkedFrame is the response.parked event of the rollout key at seq in lane.
func parkedFrame(key string, seq int, lane string) []byte {
	b, _ := json.Marshal(struct {
		Type     protocol.EventType `json:"type"`
		Seq      int                `json:"sequence_number"`
		ID       string             `json:"response_id"`
		StreamID string             `json:"stream_id,omitempty"`
	}{EventParked, seq, key, lane}) // strings and an int always encode
	return b
}

// storeParked writes v, the parked rollout key, to the store for the rest of its suspend
// timeout, under its store id (parkedRollout.storeID; errNotShared when it has none);
// replace: only while the store still holds it, Parker.Replace; store.ErrNotFound when not.
// A rollout without a suspend timeout is not parked to the store (it would never expire).
func (c *Conn) storeParked(key string, v *parkedRollout, replace bool) error {
	id := v.storeID(key)
	if id == "" {
		return errNotShared
	}
	if v.Rollout.Deadline.IsZero() {
		return errors.New("session: a rollout without a suspend timeout is not parked to the store")
	}
	ttl := time.Until(v.Rollout.Deadline)
	if ttl <= 0 {
		return errors.New("session: the rollout's suspend timeout has passed")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if replace {
		return c.parker.Replace(context.WithoutCancel(c.ctx), c.opts.Owner, id, b, ttl)
	}
	return c.parker.Park(c.ctx, c.opts.Owner, id, b, ttl)
}

// moveToStore parks the parked rollout of h (marked moving) to the store, forgets it here and
// sends its response.parked event (the append shape's; another shape's rollout, suspended
// behind a Response that has ended, sends nothing). When the store does not take it, the rollout ends with
// the drain's reason as it would have without a store. A connection that closes meanwhile
// (its client gone) ends it as Close does: the copy in the store is then taken back.
//
// A rollout already in the store (rollout.inStore) is rewritten there only while it has not
// been claimed (Parker.Replace): when another instance has claimed it (its client reattached
// there), it is forgotten here and no event is sent.
func (c *Conn) moveToStore(h *rollout, reason string) {
	c.mu.Lock()
	if h.parked == nil { // Close took it between the drain's pass and this call
		c.mu.Unlock()
		return
	}
	v := *h.parked
	shared := h.inStore
	c.mu.Unlock()
	seq := v.Sink.Seq
	v.Sink.Seq = seq + 1
	err := c.storeParked(h.key, &v, shared)
	c.mu.Lock()
	if h.parked == nil { // Close continued it to end it, or left it to the store
		c.mu.Unlock()
		if err == nil && !shared {
			_, _ = c.parker.Claim(context.WithoutCancel(c.ctx), c.opts.Owner, v.storeID(h.key))
		}
		return
	}
	if shared && errors.Is(err, store.ErrNotFound) {
		c.forgetStoredLocked(h)
		c.mu.Unlock()
		c.log.Debug("a rollout parked to the store was claimed elsewhere", "key", h.key)
		c.signal()
		return
	}
	if err != nil {
		h.moving, h.inStore = false, false
		h.cancelled, h.cancelWhy = true, reason
		r, uerr := c.unparkLocked(h, false, nil)
		c.mu.Unlock()
		if errors.Is(err, errNotShared) {
			c.log.Debug("a rollout that does not go to the store ends", "key", h.key)
		} else {
			c.log.Warn("a rollout could not be parked to the store: it ends", "key", h.key, "err", err.Error())
		}
		if uerr == nil {
			r.Cancel(reason)
		}
		c.signal()
		return
	}
	h.inStore = false
	c.forgetStoredLocked(h)
	if m := c.opts.Metrics; m != nil {
		m.StoreParks.Add(1)
	}
	c.mu.Unlock()
	if v.Shape != nil {
		c.log.Debug("rollout parked to the store", "key", h.key, "id", v.StoreID)
		c.signal()
		return
	}
	// In its lane's turn, as a terminal event, so that it never interleaves with the events of
	// the lane's sampling rollout.
	t := h.gate.enqueueAlways()
	if t.Wait(c.ctx) == nil {
		_ = c.Write(parkedFrame(h.key, seq, v.Sink.Lane))
		t.Release()
	}
	c.log.Debug("rollout parked to the store", "key", h.key, "sequence_number", seq)
	c.signal()
}

// forgetStoredLocked takes the parked rollout h, whose value the store holds (or another
// instance has claimed), out of the registry without continuing it: from now on that value
// is the rollout.
func (c *Conn) forgetStoredLocked(h *rollout) {
	c.endParkedLocked(h)
	h.inStore = false
	c.dropLocked(h)
	c.signal() // a drain counts it no more
}

// endParkedLocked ends parked h without a continuation: it gives back its quota key's slot
// and the Metrics.Parked gauge, as a rollout that ends does.
func (c *Conn) endParkedLocked(h *rollout) {
	c.opts.KeyRollouts.Release(c.opts.QuotaKey)
	h.parked, h.final = nil, true
	if m := c.opts.Metrics; m != nil {
		m.Parked.Add(-1)
	}
}

// shareParked writes the value v of h's rollout, which is parking (Limits.ParkAfter), to the
// store too when h moves to the store on drain (rollout.reattach) and is not being cancelled,
// drained or closed: a rollout so parked survives the loss of its connection or instance (a
// SIGKILL), not only a drain, at the cost of one store write per park. It lives there until
// its suspend timeout, and is claimed back (deleted) when it continues here
// (takeBackLocked). Reports whether the store took it.
func (c *Conn) shareParked(h *rollout, v *parkedRollout) bool {
	c.mu.Lock()
	share := h.reattach && !h.cancelled && !c.closing && !c.draining
	c.mu.Unlock()
	if !share {
		return false
	}
	if err := c.storeParked(h.key, v, false); errors.Is(err, errNotShared) {
		return false
	} else if err != nil {
		c.log.Warn("a parked rollout could not be written to the store: it is kept here only", "key", h.key, "err", err.Error())
		return false
	}
	if m := c.opts.Metrics; m != nil {
		m.StoreCopies.Add(1)
	}
	return true
}

// takeBackLocked claims the store's copy of h's parked value (rollout.inStore) before the
// rollout continues here, so that it continues in one place only. When the copy is gone
// before h's suspend timeout (another instance claimed it: its client reattached there) h is
// forgotten here and response_not_found (404) is returned; a copy that has expired with the
// suspend timeout is not needed. A store failure is store_unavailable (503), the rollout
// staying as it is, cancelled or not: a rollout that ended here while its copy stayed in the
// store could be resumed from there by another connection once the store answers again.
// Only a rollout whose suspend timeout has passed ends regardless: its copy expires with it.
// It holds c.mu for one store round trip, under the store's timeout.
func (c *Conn) takeBackLocked(h *rollout) error {
	deadline := h.parked.Rollout.Deadline
	expired := !deadline.IsZero() && !time.Now().Before(deadline)
	_, err := c.parker.Claim(context.WithoutCancel(c.ctx), c.opts.Owner, h.parked.storeID(h.key))
	switch {
	case err == nil:
		h.inStore = false
		if m := c.opts.Metrics; m != nil {
			m.Claims.Add(1)
		}
		return nil
	case errors.Is(err, store.ErrNotFound) && !expired:
		c.forgetStoredLocked(h)
		c.log.Debug("a rollout parked to the store was claimed elsewhere", "key", h.key)
		return notFoundError(h.key)
	case errors.Is(err, store.ErrNotFound), expired:
		h.inStore = false
		return nil
	}
	return StoreUnavailable()
}

// putBackLocked writes h's parked value to the store again after takeBackLocked claimed it
// and the continuation was refused (the rollout stays parked).
func (c *Conn) putBackLocked(h *rollout) {
	if err := c.storeParked(h.key, h.parked, false); err != nil {
		c.log.Warn("a parked rollout could not go back to the store: it is kept here only", "key", h.key, "err", err.Error())
		return
	}
	h.inStore = true
}

// claim takes the parked rollout key of the connection's owner from the store into the
// registry, parked, and reports whether there was one. Errors: shutting down (503) while the
// connection drains or closes (the store untouched), store_unavailable (503) when the store
// fails, server_error (500) for a value that does not decode, and those of adoptLocked (the
// value then goes back to the store).
func (c *Conn) claim(key string) (bool, error) {
	if c.parker == nil {
		return false, nil
	}
	c.mu.Lock()
	shutting := c.closing || c.draining
	c.mu.Unlock()
	if shutting {
		// adoptLocked would refuse it: the store is not touched, so that the value stays
		// there for the instance the client tries next.
		return false, shuttingDownError()
	}
	// Not the connection's ctx: a claim whose GETDEL ran must get its reply, and a value it
	// cannot adopt must go back, even if the connection ends meanwhile (else the rollout is
	// lost); the store's own timeout bounds both.
	ctx := context.WithoutCancel(c.ctx)
	b, err := c.parker.Claim(ctx, c.opts.Owner, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, StoreUnavailable()
	}
	v := new(parkedRollout)
	if err := json.Unmarshal(b, v); err != nil || v.Rollout == nil || v.Shape != nil || v.Owner != c.opts.Owner {
		c.log.Error("a rollout claimed from the store does not decode", "key", key, "err", errString(err))
		return false, protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "The parked response %s could not be resumed.", key)
	}
	c.mu.Lock()
	err = c.adoptLocked(key, v)
	c.mu.Unlock()
	if err != nil {
		c.giveBack(ctx, key, b, v)
		return false, err
	}
	if m := c.opts.Metrics; m != nil {
		m.Claims.Add(1)
	}
	c.log.Debug("rollout claimed from the store", "key", key)
	return true, nil
}

// giveBack writes b, the value v claimed from the store as id, back to it for the rest of its
// suspend timeout, after the connection could not take it.
func (c *Conn) giveBack(ctx context.Context, id string, b []byte, v *parkedRollout) {
	if ttl := time.Until(v.Rollout.Deadline); ttl > 0 {
		if err := c.parker.Park(ctx, c.opts.Owner, id, b, ttl); err != nil {
			c.log.Warn("a claimed rollout could not go back to the store", "id", id, "err", err.Error())
		}
	}
}

// AdoptParked records, in its shape, the parked rollout key that Conn.ClaimParked took from
// the store: state is what its SharedParkSink returned, context every item of the rollout's
// context in order (read-only). It is called before the connection registers the rollout;
// latest is the Response a continuation resumes it by (Conn.Latest), undo forgets it again
// when the connection cannot take it. An error (a state that does not decode, a Response
// already on the connection) refuses the rollout: it goes back to the store.
type AdoptParked func(key string, state json.RawMessage, context []protocol.Item) (latest string, undo func(), err error)

// ClaimParked takes the rollout that a SharedParkSink of this connection's owner
// (Options.Owner) parked to the store (Options.Parker) as id into this connection's registry,
// parked, once adopt has recorded it in the shape: the next Resume of its key continues it
// here, hot. Of connections racing for one id, on any instances sharing the store, exactly one
// gets it. It reports whether it did: false and no error when there is no store or the store
// holds nothing under id (never parked there, claimed already, expired, another owner's).
// Errors: store_unavailable (503) when the store fails; server_error (500) for a value that
// does not decode or that adopt refuses; shutting down (503) while the connection drains, and
// the errors of a create's limits. A value decoded but not taken goes back to the store.
func (c *Conn) ClaimParked(id string, adopt AdoptParked) (bool, error) {
	if c.parker == nil || id == "" {
		return false, nil
	}
	defer c.cancelOrphans()             // as in Start
	ctx := context.WithoutCancel(c.ctx) // as claim: a value claimed is adopted or goes back
	b, err := c.parker.Claim(ctx, c.opts.Owner, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, StoreUnavailable()
	}
	v := new(parkedRollout)
	if err := json.Unmarshal(b, v); err != nil || v.Rollout == nil || v.Shape == nil || v.Key == "" || v.StoreID != id || v.Owner != c.opts.Owner {
		if err == nil {
			err = errors.New("not a parked rollout of another shape of this owner under this id")
		}
		c.log.Error("a rollout claimed from the store does not decode", "id", id, "err", err.Error())
		return false, protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "The parked response %s could not be resumed.", id)
	}
	latest, undo, err := adopt(v.Key, v.Shape, v.Rollout.ContextItems())
	if err != nil {
		c.log.Error("a rollout claimed from the store was refused by its shape", "id", id, "err", err.Error())
		c.giveBack(ctx, id, b, v)
		return false, protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "The parked response %s could not be resumed.", id)
	}
	c.mu.Lock()
	if err = c.adoptLocked(v.Key, v); err == nil {
		h := c.reg[v.Key]
		h.reattach = c.unparkSink != nil // it goes back to the store when it parks again
		h.latest = latest
	}
	c.mu.Unlock()
	if err != nil {
		undo()
		c.giveBack(ctx, id, b, v)
		return false, err
	}
	if m := c.opts.Metrics; m != nil {
		m.Claims.Add(1)
	}
	c.log.Debug("rollout claimed from the store", "key", v.Key, "id", id)
	return true, nil
}

func errString(err error) string {
	if err == nil {
		return "not an append-shape rollout of this owner"
	}
	return err.Error()
}

// adoptLocked registers the parked rollout v under key as a create would: the connection's
// limits, lane, key quota and budget. Errors: shutting down (503) while the connection
// drains, invalid_value for a key in use here, and those of Start's checks.
func (c *Conn) adoptLocked(key string, v *parkedRollout) error {
	if c.closing || c.draining {
		return shuttingDownError()
	}
	if _, dup := c.reg[key]; dup {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "", "Response id %s is already in use on this connection.", key)
	}
	if err := c.checkLimitsLocked(); err != nil {
		return err
	}
	g, err := c.laneLocked(v.lane())
	if err != nil {
		return err
	}
	if err := c.opts.KeyRollouts.Acquire(c.opts.QuotaKey); err != nil {
		return err
	}
	size := ItemsBytes(v.Rollout.Context)
	if err := c.reserveLocked(size); err != nil {
		c.opts.KeyRollouts.Release(c.opts.QuotaKey)
		return err
	}
	now := time.Now()
	h := &rollout{key: key, lane: v.lane(), gate: g, parked: v, started: now, turnStart: now, turns: 1, bytes: size, usage: v.Rollout.Usage,
		counted: !v.Rollout.SuspendOnAnswer}
	c.stamp++
	h.stamp, h.seq = c.stamp, c.stamp
	c.registerLocked(h)
	h.seen = v.Rollout.ContextItems()
	if v.Shape == nil {
		c.shareLocked(h, v.Sink.Response.Store)
		if h.live != nil {
			c.opts.LiveItems.add(h.live, h.seen)
		}
	}
	if m := c.opts.Metrics; m != nil {
		m.Parked.Add(1)
	}
	if d := v.Rollout.Deadline; !d.IsZero() && (c.nextExpiry.IsZero() || d.Before(c.nextExpiry)) {
		c.nextExpiry = d
	}
	return nil
}

// parkToStoreLocked is the drain's part for a rollout h that may move to the store (reason
// server_shutdown, h.reattach, not cancelled): a parked one is marked moving and returned for
// moveToStore; a live suspended one is asked to park (it comes back through the loop of
// Drain once parked). handled is false when h is left to end as without a store; once the
// grace is over (all) a suspended rollout that was asked and did not park (a steer waits, or
// its backend could not park it then) is.
func (c *Conn) parkToStoreLocked(h *rollout, reason string, all bool) (move, handled bool) {
	if reason != protocol.ReasonServerShutdown || !h.reattach || h.cancelled {
		return false, false
	}
	if h.parked != nil {
		if !h.moving {
			h.moving = true
			return true, true
		}
		return false, true
	}
	switch h.r.State() {
	case sampler.Parked:
		return false, true // on its way: Parked signals the drain
	case sampler.Suspended:
		if h.parkAsked {
			return false, !all // asked: it parks, or ends once the grace is over
		}
		h.parkAsked = true
		return false, h.r.Park() == nil
	}
	return false, false
}
