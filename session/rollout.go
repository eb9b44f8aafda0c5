package session

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// rollout is the registry entry of one rollout: the live sampler.Rollout while it runs, and the
// chain's items (history, inputs and outputs, in order) for previous_response_id once it ends.
// The rollout's phase is the sampler.Rollout's State, asked of it; the entry only records
// what the connection accounts for it.
type rollout struct {
	// Immutable
	key  string
	lane string // stream_id; "" is the default lane
	gate *gate  // the lane's

	// Guarded by Conn.mu: the live rollout, or (r nil) its parked state (park.go). A
	// rollout whose r is in State Parked is parking: its value is on the way.
	r      *sampler.Rollout
	parked *parkedRollout

	// Guarded by Conn.mu
	final     bool            // the rollout has ended and items holds its chain
	turnStart time.Time       // when the current turn was accepted (Start or Resume)
	turn      *ticket         // the ticket of the current turn
	items     []protocol.Item // the chain once ended (sampler.Ending.Context, shared read-only)
	// seen is the rollout's context as of its latest suspension (sampler.Suspension.Context,
	// shared read-only): the items its client has seen, found by item_reference (Conn.Items)
	// while it lives. live is its part of Options.LiveItems (nil when its items are not
	// shared there: another shape's rollout, or a store:false Response).
	seen      []protocol.Item
	live      *liveHolder
	bytes     int64 // items, settings and model
	settings  int64 // StartRequest.SettingsBytes
	model     int64 // the model session's state at the last suspension (sampler.Suspension.StateBytes)
	stamp     uint64
	cancelled bool
	cancelWhy string // the reason of the Cancel (or drain) that set cancelled
	// parkCancel is the rollout that the end of a park started from the parked value and
	// cancelled, because a cancel had come while it parked (parkingSink.Parked): its ending is
	// that cancel's (cancelKey).
	parkCancel *sampler.Rollout
	// answered: the rollout's sink has answered its end (coreSink.Ended); until then refusals
	// holds the 409s of cancels that came while it ended, written right after its terminal event.
	answered bool
	refusals []error
	started  time.Time      // when Start accepted the rollout
	seq      uint64         // the connection's stamp at Start: the order of starts
	turns    int            // turns begun: Start, then one per accepted Resume
	usage    protocol.Usage // cumulative, as of the last suspension or the end
	context  int            // tokens of the last sampling step's context (input + output)
	// reattach: an append-shape rollout that a drain parks to the store (reattachableLocked);
	// parkAsked: the drain asked it to park; moving: its parked value is being written there.
	// inStore: it parked (Limits.ParkAfter) and its parked value was written to the store
	// too (shareParked): the store's copy is claimed back before it continues here.
	reattach, parkAsked, moving, inStore bool
	// parkable: its sink can park (parkingSink); pressured: memory pressure asked it to park
	// (Budget.relieve) since it last suspended, at suspendedAt.
	parkable, pressured bool
	suspendedAt         time.Time
	// idleAnswer: the rollout suspends after answers (Config.SuspendOnAnswer) and its last
	// suspension had no pending calls; Conn.releaseIdleLocked may release it.
	idleAnswer bool
	// counted: the rollout counts toward Limits.CacheResponses. Not for a rollout of a shape
	// that keeps its Responses (Config.SuspendOnAnswer): those are counted (kept.go).
	counted bool
	// latest: the shape's Response a continuation resumes the suspended rollout by (public
	// shape, latest.go); "" when none.
	latest string
}

// StartRequest starts a rollout through Conn.Start.
type StartRequest struct {
	// Key is the registry key (the Response id in the append shape).
	Key string
	// Config is passed to sampler.Start; Ticket is filled in by Conn. Config.Sink is the shape
	// adapter's sink: Conn wraps it to track the rollout's state.
	Config sampler.Config
	// SettingsBytes is what the rollout holds besides its items (SettingsBytes of the
	// create): counted with the items toward MaxRolloutBytes and CacheBytes.
	SettingsBytes int64
	// Lane is the create's stream_id ("" for the default lane): the rollout's
	// turns queue in that lane's FIFO, and every later turn (Resume) runs in it too.
	Lane string
}

// Start queues a new rollout behind the sampling one (FIFO) and starts its goroutine. It
// returns websocket_queue_limit_reached (429) when the queue is full, and an error for a key
// already in use. When the server's Budget has no room for it, suspended live rollouts of
// every connection are parked first to make room (Budget.relieve), and it is tried again once.
func (c *Conn) Start(req StartRequest) error {
	defer c.cancelOrphans() // making room may have evicted a suspended rollout's latest Response
	err := c.start(req)
	if need := c.overloaded(err, ItemsBytes(req.Config.History)+ItemsBytes(req.Config.Input)+req.SettingsBytes); need > 0 && c.opts.Budget.relieve(need) {
		err = c.start(req)
	}
	return err
}

// overloaded returns the bytes the Budget lacks for add more when err is its refusal
// (server_overloaded); 0 otherwise.
func (c *Conn) overloaded(err error, add int64) int64 {
	if perr, ok := protocol.AsError(err); !ok || perr.Code != protocol.CodeOverloaded {
		return 0
	}
	return max(c.opts.Budget.deficit(add), 1)
}

// start is one attempt of Start.
func (c *Conn) start(req StartRequest) error {
	c.mu.Lock()
	if c.closing || c.draining {
		why := c.drainWhy
		c.mu.Unlock()
		if why == protocol.ReasonConnectionLimit {
			return connectionLimitError(c.opts.MaxConnectionAge)
		}
		return shuttingDownError()
	}
	if _, dup := c.reg[req.Key]; dup {
		c.mu.Unlock()
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "", "Response id %s is already in use on this connection.", req.Key)
	}
	if err := c.checkLimitsLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	g, err := c.laneLocked(req.Lane)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	size := ItemsBytes(req.Config.History) + ItemsBytes(req.Config.Input) + req.SettingsBytes
	if err := c.opts.KeyRollouts.Acquire(c.opts.QuotaKey); err != nil {
		c.mu.Unlock()
		return err
	}
	t, err := c.admitLocked(g, size, size)
	if err != nil {
		c.opts.KeyRollouts.Release(c.opts.QuotaKey)
		c.mu.Unlock()
		return err
	}
	now := time.Now()
	h := &rollout{key: req.Key, lane: req.Lane, gate: g, turnStart: now, started: now, turns: 1, bytes: size, settings: req.SettingsBytes, turn: t,
		counted: !req.Config.SuspendOnAnswer}
	if m := c.opts.Metrics; m != nil {
		m.Queued.Add(1)
	}
	c.stamp++
	h.stamp, h.seq = c.stamp, c.stamp
	c.registerLocked(h)
	cfg := req.Config
	cfg.Ticket = t
	if cfg.SuspendTimeout == 0 {
		cfg.SuspendTimeout = c.opts.SuspendTimeout
	}
	if cfg.Model == nil {
		cfg.Model = c.opts.Model
	}
	cfg.ConnID, cfg.Lane = c.id, req.Lane
	cfg.Sink = c.sinkFor(h, cfg.Sink, cfg.SuspendOnAnswer)
	cfg.ParkAfter = c.opts.ParkAfter
	cfg.Budget = c.modelBudget()
	r := sampler.New(c.ctx, cfg)
	h.r = r
	c.goroutines.Add(1)
	go func() {
		defer c.goroutines.Done()
		r.Run()
	}()
	c.mu.Unlock()
	c.log.Debug("rollout started", "key", req.Key, "history_items", len(cfg.History), "input_items", len(cfg.Input))
	return nil
}

// checkLimitsLocked answers rollout_limit_reached (429) when a new rollout would exceed
// Limits.MaxSuspended on this connection or Limits.MaxSuspendedTotal on the server.
//
// A rollout that only waits behind a completed public Response (Config.SuspendOnAnswer, no
// pending calls: its chain is kept in the registry and a continuation can rebuild it) does
// not hold a client to these limits: the least recently used one is released to make room.
func (c *Conn) checkLimitsLocked() error {
	if max := c.opts.MaxSuspended; max > 0 {
		live := 0
		for _, h := range c.reg {
			if !h.final && !h.cancelled {
				live++
			}
		}
		if live >= max && c.releaseIdleLocked() {
			live--
		}
		if live >= max {
			return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeRolloutLimit, "",
				"This connection already holds %d live rollouts (queued, sampling or suspended, across its lanes; the limit): let one finish, or use another connection.", live)
		}
	}
	if max, m := c.opts.MaxSuspendedTotal, c.opts.Metrics; max > 0 && m != nil {
		if n := m.Suspended.Load() + m.Parked.Load() + m.Queued.Load() + m.Sampling.Load(); n >= max && !c.releaseIdleLocked() {
			return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeRolloutLimit, "",
				"The server holds %d live rollouts (its limit): try again later.", n)
		}
	}
	return nil
}

// releaseIdleLocked cancels the least recently used rollout of this connection that is
// suspended behind an answer (Config.SuspendOnAnswer with no pending calls) and reports
// whether there was one. Its Responses stay kept in the registry, so a continuation takes
// the cold path.
func (c *Conn) releaseIdleLocked() bool {
	var idle *rollout
	for _, h := range c.reg {
		if h.final || h.cancelled || !h.idleAnswer || h.r == nil || h.r.State() != sampler.Suspended {
			continue
		}
		if idle == nil || h.stamp < idle.stamp {
			idle = h
		}
	}
	if idle == nil {
		return false
	}
	idle.cancelled, idle.cancelWhy = true, protocol.ReasonCancelled
	idle.r.Cancel(protocol.ReasonCancelled)
	if m := c.opts.Metrics; m != nil {
		m.Evictions.Add(1)
	}
	return true
}

// ownBytes is the bytes of h's items and settings, what Limits.MaxRolloutBytes bounds: its
// held bytes without the model session's state, which the memory budget counts besides.
func (h *rollout) ownBytes() int64 { return h.bytes - h.model }

// admitLocked takes a place in the sampling queue for a turn after which the rollout holds
// bytes of items and settings, add of them new (reserved, see reserveLocked):
// rollout_too_large (400) over Limits.MaxRolloutBytes, the errors of reserveLocked,
// websocket_queue_limit_reached (429) when the queue is full.
func (c *Conn) admitLocked(g *gate, bytes, add int64) (*ticket, error) {
	if max := c.opts.MaxRolloutBytes; max > 0 && bytes > max {
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeRolloutTooLarge, "input",
			"The rollout would hold about %d bytes of items and settings, over this server's limit of %d: start a new rollout with a shorter context.", bytes, max)
	}
	if err := c.reserveLocked(add); err != nil {
		return nil, err
	}
	t, ok := g.enqueue()
	if !ok {
		c.opts.Budget.Release(add)
		return nil, queueFullError(c.opts.QueueDepth)
	}
	return t, nil
}

// Resume continues the suspended rollout key with input, which must carry exactly one
// function_call_output per pending call, then optionally messages (sampler.CheckOutputs).
// Errors: response_not_found (404) for an unknown key, response_not_suspended (409) when it is
// queued, sampling or ended, tool_call_not_found / missing_tool_output / duplicate_tool_output
// (400; the rollout stays suspended), websocket_queue_limit_reached (429). A parked rollout is
// continued first (sampler.Unpark): the resume is as hot as a live one's.
//
// A key that is not on this connection is claimed from the store when it keeps parked
// rollouts (Options.Reattach): the rollout continues here, hot; errors then also
// store_unavailable (503) and those of a create's limits. As Start, when the server's Budget
// has no room for the input, suspended live rollouts are parked first to make room.
func (c *Conn) Resume(key string, input []protocol.Item) error {
	defer c.cancelOrphans() // as in Start
	claimed, relieved := false, false
	for {
		err := c.resume(key, input)
		if need := c.overloaded(err, ItemsBytes(input)); need > 0 && !relieved {
			relieved = true
			if c.opts.Budget.relieve(need) {
				continue
			}
		}
		if errors.Is(err, errNotHere) && !claimed {
			if claimed, err = c.claim(key); err == nil && claimed {
				continue
			}
			if err == nil {
				err = errNotHere
			}
		}
		if errors.Is(err, errNotHere) {
			return notFoundError(key)
		}
		if !errors.Is(err, sampler.ErrParked) {
			return err
		}
		// It parked between its continuation and the Resume (a very short ParkAfter): again.
	}
}

// resume is one attempt of Resume; sampler.ErrParked when the rollout parked meanwhile.
func (c *Conn) resume(key string, input []protocol.Item) error {
	c.mu.Lock()
	h, ok := c.reg[key]
	if !ok {
		c.mu.Unlock()
		return errNotHere
	}
	if h.final {
		c.mu.Unlock()
		return notSuspendedError(key, sampler.Ended)
	}
	c.parkedLocked(h) // c.mu is released meanwhile: h.moving is read after it
	if h.moving {
		c.mu.Unlock()
		return shuttingDownError()
	}
	var r *sampler.Rollout
	if h.parked == nil {
		r = h.r
		if state := r.State(); state != sampler.Suspended {
			c.mu.Unlock()
			return notSuspendedError(key, state)
		}
	}
	add := ItemsBytes(input)
	t, perr := c.admitLocked(h.gate, h.ownBytes()+add, add)
	if perr != nil {
		c.mu.Unlock()
		return perr
	}
	h.turnStart = time.Now()
	h.turn = t
	h.turns++
	h.parkAsked = false // a drain asks again at the next suspension
	c.stamp++
	h.stamp = c.stamp
	if r == nil {
		// Parked: the input is checked here and the rollout continues with it, so that this
		// call waits for no goroutine.
		_, err := c.unparkLocked(h, false, &sampler.Resume{Input: input, Ticket: t})
		if err == nil {
			c.growLocked(h, add)
		} else {
			t.Release()
			c.opts.Budget.Release(add)
			h.turns--
		}
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	err := r.Resume(sampler.Resume{Input: input, Ticket: t})
	if err == nil {
		c.mu.Lock()
		if c.inRegistryLocked(h) {
			c.growLocked(h, add)
		} else {
			// It ended meanwhile (the model refused the input at once) and was dropped with
			// the bytes it held, which did not count add yet.
			c.opts.Budget.Release(add)
		}
		c.mu.Unlock()
		c.log.Debug("rollout resumed", "key", key, "input_items", len(input))
		return nil
	}
	t.Release()
	c.mu.Lock()
	c.opts.Budget.Release(add)
	h.turns-- // the turn never began
	c.mu.Unlock()
	if errors.Is(err, sampler.ErrParked) {
		return err
	}
	state := r.State()
	if perr, ok := protocol.AsError(err); ok {
		return perr
	}
	return notSuspendedError(key, state)
}

// Cancel ends the rollout key with reason (incomplete). Errors: response_not_found (404, also
// for a parked rollout another instance claimed from the store), response_already_completed
// (409) for a rollout that has ended, those of continuing a parked rollout: among them
// store_unavailable (503) when its copy in the shared store cannot be claimed back, the
// rollout then staying parked and not cancelled (a cancel may be sent again).
// A key that is not on this connection is claimed from the store as by Resume, then ended.
//
// A cancel is either the rollout's ending (its terminal event says so) or refused with 409,
// never lost: one that reaches a rollout whose model has just finished, before the rollout
// settled on that ending, still ends it cancelled; the 409 of one that comes while the
// rollout is ending is written on the connection right after the rollout's terminal event,
// and Cancel returns nil for it (the caller writes nothing, and goes on at once).
func (c *Conn) Cancel(key, reason string) error { return c.cancelKey(key, reason, true) }

// CancelQuietly is Cancel for a caller that ignores the 409 of a rollout that ended meanwhile:
// that 409 is returned, never written on the connection.
func (c *Conn) CancelQuietly(key, reason string) error { return c.cancelKey(key, reason, false) }

func (c *Conn) cancelKey(key, reason string, ordered bool) error {
	c.mu.Lock()
	h, ok := c.reg[key]
	if !ok {
		c.mu.Unlock()
		claimed, err := c.claim(key)
		if err != nil {
			return err
		}
		if !claimed {
			return notFoundError(key)
		}
		return c.cancelKey(key, reason, ordered)
	}
	if h.moving {
		c.mu.Unlock()
		return shuttingDownError()
	}
	if h.final || h.cancelled {
		err := c.refuseLocked(h, key, ordered)
		c.mu.Unlock()
		return err
	}
	h.cancelled, h.cancelWhy = true, reason // a rollout parking now is cancelled once parked
	r, err := c.liveLocked(h)
	if err != nil && h.parked != nil {
		// Still parked (its copy in the store could not be claimed back: store_unavailable):
		// not cancelled, and a later cancel may try again.
		h.cancelled, h.cancelWhy = false, ""
	}
	c.mu.Unlock()
	if err != nil {
		return err // claimed by another instance meanwhile (404), or it could not be continued
	}
	// A rollout that has begun to park but is still Suspended (its session's Park runs) takes
	// the cancel here at once and parks all the same; the park's end then finds h.cancelled
	// and continues and cancels it (parkingSink.Parked), so the answer, its incomplete
	// ending with this reason, still comes, and nothing resumes it meanwhile.
	if r.TryCancel(reason) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.parkCancel == r {
		// The rollout was parking when this cancel came (Parked, its value not yet here):
		// the park's end continued it and cancelled it for this cancel (parkingSink.Parked),
		// and it may have ended before TryCancel. Its ending (incomplete, this cancel's
		// reason) answers the cancel; a 409 would say the cancel came too late.
		return nil
	}
	// The rollout had settled on another ending: its sink is answering it.
	return c.refuseLocked(h, key, ordered)
}

// refuseLocked answers a cancel of h's rollout, which has ended or is ending, with 409
// response_already_completed. For an ordered cancel of a rollout whose terminal event is still
// to come (coreSink.Ended has not answered), the 409 is queued on h to follow that event and
// refuseLocked returns nil. A parked or parking rollout is answered at once (its end may wait
// for an unpark that can fail).
func (c *Conn) refuseLocked(h *rollout, key string, ordered bool) error {
	err := alreadyEndedError(key)
	if !ordered || h.answered || h.parked != nil || h.r == nil || h.r.State() == sampler.Parked {
		return err
	}
	h.refusals = append(h.refusals, protocol.InLane(err, h.lane))
	return nil
}

// Chain returns the items of the rollout key (history, inputs and outputs in order) for a
// continuation by previous_response_id, and whether the rollout has ended. ok is false when the
// key is unknown or evicted.
func (c *Conn) Chain(key string) (items []protocol.Item, ended bool, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.reg[key]
	if !ok {
		return nil, false, false
	}
	c.stamp++
	h.stamp = c.stamp
	if e, _ := c.ended.Peek(key); h.final && e.h == h {
		c.ended.Get(key) // a use: the most recently used ended entry
	}
	return h.items[:len(h.items):len(h.items)], h.final, true
}

// logCold logs at debug level that the create resp continues prev on the cold path, and why.
func (c *Conn) logCold(resp, prev string, cont *protocol.Continuation) {
	if cont.Setting != "" {
		c.log.Debug("continuation went cold", "response", resp, "previous_response_id", prev, "reason", cont.Reason, "setting", cont.Setting)
		return
	}
	c.log.Debug("continuation went cold", "response", resp, "previous_response_id", prev, "reason", cont.Reason)
}

// Steer hands a response.steer to the rollout key (sampler.Rollout.Steer). The
// steer's input counts toward the rollout's bytes like an append's. Errors: response_not_found
// (404) for an unknown key, response_already_completed (409) once the rollout has ended,
// too_many_pending_steers (409), rollout_too_large (400), the budget's errors (503). The caller
// checks that the model can steer (CanSteer).
func (c *Conn) Steer(key string, s sampler.Steer) error {
	defer c.cancelOrphans() // as in Start
	c.mu.Lock()
	h, ok := c.reg[key]
	if !ok {
		c.mu.Unlock()
		return notFoundError(key)
	}
	if h.final || (h.r != nil && h.r.State() == sampler.Ended) {
		c.mu.Unlock()
		return alreadyEndedError(key)
	}
	r, err := c.liveLocked(h)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	add := ItemsBytes(s.Input)
	if max := c.opts.MaxRolloutBytes; max > 0 && h.ownBytes()+add > max {
		c.mu.Unlock()
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeRolloutTooLarge, "input",
			"The steer would take the rollout to about %d bytes of items and settings, over this server's limit of %d.", h.ownBytes()+add, max)
	}
	if err := c.reserveLocked(add); err != nil {
		c.mu.Unlock()
		return err
	}
	c.growLocked(h, add)
	c.mu.Unlock()
	err = r.Steer(s)
	if err == nil {
		return nil
	}
	c.mu.Lock()
	if c.inRegistryLocked(h) {
		c.growLocked(h, -add)
		c.opts.Budget.Release(add)
	} // else it ended and was dropped meanwhile, releasing its bytes with add among them
	c.mu.Unlock()
	if errors.Is(err, sampler.ErrParked) {
		return c.Steer(key, s) // it parked between its continuation and the steer: again
	}
	if errors.Is(err, sampler.ErrTooManySteers) {
		return protocol.Errorf(http.StatusConflict, protocol.CodeTooManySteers, "",
			"Response %s already has %d steers waiting to be applied.", s.PreviousResponseID, sampler.MaxPendingSteers)
	}
	return alreadyEndedError(key)
}

// CanSteer reports whether the connection's model takes response.steer (sampler.CanSteer).
func (c *Conn) CanSteer() bool { return sampler.CanSteer(c.opts.Model) }

// laneOf returns the lane of the rollout key ("" when unknown or in the default lane).
func (c *Conn) laneOf(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.reg[key]; ok {
		return h.lane
	}
	return ""
}

// Forget removes key from the registry if its rollout has ended (a failed continuation evicts
// its parent in the public shape).
func (c *Conn) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.reg[key]; ok && h.final {
		c.dropLocked(h)
	}
}

// ItemsBytes estimates the memory held by items, in bytes: their text plus a fixed overhead
// each. It is the unit of Limits.CacheBytes and Limits.MaxRolloutBytes.
func ItemsBytes(items []protocol.Item) int64 { return store.ItemsBytes(items) }

// stateChanged keeps the Budget's charge of suspended live rollouts (chargeLive), the Metrics
// gauges and the turn-time histogram as h changes phase
// (sampler.StateObserver, through coreSink).
func (c *Conn) stateChanged(h *rollout, from, to sampler.State) {
	c.chargeLive(from, to)
	m := c.opts.Metrics
	if m == nil {
		return
	}
	if g := m.gauge(from); g != nil {
		g.Add(-1)
	}
	if g := m.gauge(to); g != nil {
		g.Add(1)
	}
	inTurn := from == sampler.Queued || from == sampler.Sampling || from == sampler.Resuming
	if inTurn && (to == sampler.Suspended || to == sampler.Ended) {
		c.mu.Lock()
		start := h.turnStart
		c.mu.Unlock()
		m.observeTurn(time.Since(start))
	}
}

// coreSink tracks the rollout's state in the registry around the shape adapter's sink, which
// it wraps (sampler.Wrapper): Started and Event go straight to that sink, and the rollout finds
// the adapter's optional interfaces (SteerSink, KeepAliver) on it; coreSink declares only the
// calls the registry has work in.
type coreSink struct {
	sampler.Sink // the shape adapter's

	c   *Conn
	h   *rollout
	was sampler.State // the phase the rollout ended from
	// answers: Config.SuspendOnAnswer (the public shape's rollouts)
	answers bool
}

// Unwrap implements sampler.Wrapper.
func (s *coreSink) Unwrap() sampler.Sink { return s.Sink }

// Steered counts the successor response as a new turn (the adapter's SteerSink answers it).
func (s *coreSink) Steered(st sampler.Steering) {
	s.c.mu.Lock()
	s.h.turns++
	s.h.record(st.Usage, st.StepUsage)
	s.c.mu.Unlock()
}

// StateChanged implements sampler.StateObserver.
func (s *coreSink) StateChanged(from, to sampler.State) {
	if to == sampler.Ended {
		s.was = from // for the log line; Ended is called next, on the same goroutine
	}
	s.c.stateChanged(s.h, from, to)
}

// Suspended gives back the server-wide admission before the adapter runs (it may write to the
// store, under the store's timeout, before its terminal event): a slow store then holds only
// this connection's slot, not other connections' sampling.
func (s *coreSink) Suspended(sp sampler.Suspension) {
	c := s.c
	c.mu.Lock()
	s.h.idleAnswer = s.answers && len(sp.PendingCallIDs) == 0
	s.h.suspendedAt, s.h.pressured = time.Now(), false
	c.resizeLocked(s.h, s.h.bytes+ItemsBytes(sp.Output)+sp.StateBytes-s.h.model)
	s.h.model = sp.StateBytes
	s.h.seen = sp.Context
	if s.h.live != nil {
		c.opts.LiveItems.add(s.h.live, sp.Context) // before response.done: a reference sent after it finds them
	}
	t := s.h.turn
	s.h.record(sp.Usage, sp.StepUsage)
	c.mu.Unlock()
	t.releaseAdmission()
	s.Sink.Suspended(sp)
	c.signal()
}

// Ended records the ending, then lets the adapter send the terminal event. A rollout that ends
// without holding the sampling slot (cancelled or timed out while queued or suspended, or
// ended by a drain) first waits for the slot, so that its events never interleave with those
// of the sampling rollout. A client that is gone is not waited for.
func (s *coreSink) Ended(e sampler.Ending) {
	c, h := s.c, s.h
	c.mu.Lock()
	c.opts.KeyRollouts.Release(c.opts.QuotaKey)
	h.final = true
	h.items, h.seen = e.Context, nil
	h.model = 0 // the model session is closed
	c.resizeLocked(h, ItemsBytes(e.Context)+h.settings)
	t := h.turn
	h.record(e.Usage, e.StepUsage)
	c.mu.Unlock()
	logEnded(c.log, h.key, s.was, e)
	t.releaseAdmission() // as in Suspended
	if !e.Sampling && e.Err == nil {
		t := h.gate.enqueueAlways()
		if t.Wait(c.ctx) == nil {
			s.Sink.Ended(e)
			t.Release()
		}
	} else {
		s.Sink.Ended(e)
	}
	// The adapter has stored the Response (or could not): its items are the store's now.
	c.mu.Lock()
	c.unshareLocked(h)
	c.mu.Unlock()
	// Only now is it an ended rollout that eviction may take: while its sink answered the
	// end, the adapter may have taken it out of the registry (the public shape keeps the
	// rollout's Responses, KeepResponse, and forgets the rollout), and that is not an eviction.
	c.mu.Lock()
	h.answered = true
	refusals := h.refusals
	h.refusals = nil
	c.mu.Unlock()
	for _, err := range refusals {
		_ = c.WriteError(err) // cancels that came while it ended: after its terminal event
	}
	c.mu.Lock()
	if c.reg != nil && c.inRegistryLocked(h) {
		if _, taken := c.ended.Peek(h.key); taken {
			c.dropLocked(h) // a Response the shape keeps has its key: it holds the chain
		} else {
			c.ended.Put(h.key, endedEntry{h: h}, h.bytes) // the connection's newest entry
			c.newest = h.key
		}
		c.evictLocked()
	}
	c.mu.Unlock()
	c.cancelOrphans()
	c.signal()
}

// logEnded logs a rollout's end. A rollout stopped because its client left or its connection
// closed (Ending.Err with status incomplete) is logged as "rollout released" with the state it
// was in: no terminal event was sent and nobody cancelled it. That is how every public-shape
// chain ends: its Responses completed, and its rollout waited suspended for a continuation
// until the request or connection ended.
func logEnded(log *slog.Logger, key string, was sampler.State, e sampler.Ending) {
	var pe *sampler.PanicError
	if errors.As(e.Err, &pe) {
		log.Error("model backend panicked: the rollout ended failed", "key", key, "panic", pe.Value, "stack", string(pe.Stack))
		return
	}
	if e.Err != nil && e.Status == protocol.ResponseIncomplete {
		log.Debug("rollout released", "key", key, "state", was.String(), "cause", e.Err.Error(), "input_tokens", e.Usage.InputTokens)
		return
	}
	attrs := []any{"key", key, "status", e.Status, "input_tokens", e.Usage.InputTokens}
	if e.Reason != "" {
		attrs = append(attrs, "reason", e.Reason)
	}
	if e.Err != nil {
		attrs = append(attrs, "err", e.Err.Error())
	}
	log.Debug("rollout ended", attrs...)
}
