package compat

import (
	"net/http"
	"sync/atomic"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// Counters count how public continuations ran: Hot resumed a suspended
// rollout, Cold rebuilt a rollout from the chain's items, New started a chain, WarmUp counts
// generate:false requests (also counted in New, Hot or Cold). A response is counted when it
// starts, before its first event; ColdBy splits Cold by reason. Safe for concurrent use.
type Counters struct {
	Hot, Cold, New, WarmUp atomic.Int64
	coldBy                 [len(protocol.ColdReasons)]atomic.Int64
}

// ColdBy returns how many cold continuations had reason (one of protocol.ColdReasons; 0 for
// another string).
func (c *Counters) ColdBy(reason string) int64 {
	if i := protocol.ColdReasonIndex(reason); i >= 0 {
		return c.coldBy[i].Load()
	}
	return 0
}

func (c *Counters) countCold(reason string) {
	if i := protocol.ColdReasonIndex(reason); i >= 0 {
		c.coldBy[i].Add(1)
	}
}

// create handles one response.create (WebSocket) or POST body (HTTP) through the
// connection's one create pipeline (session.Conn.Create), with this registry as its shape. It
// returns a request-scoped error, in which case nothing was started and no event was sent, or
// the segment, whose done channel closes once its terminal event has been sent.
func (r *registry) create(p *protocol.CreateParams, em emitter, ws bool, counters *Counters) (*pendingSegment, error) {
	pc := &publicCreate{r: r, em: em, where: protocol.PublicHTTP, counters: counters}
	if ws {
		pc.where = protocol.PublicWebSocket
	}
	if err := r.conn.Create(p, pc); err != nil {
		return nil, err
	}
	return pc.ps, nil
}

// publicCreate is the public shape's part in one create (session.Shape): its ended segments
// are kept in the connection's registry, and its segment, once routed, answers with em.
type publicCreate struct {
	r        *registry
	em       emitter
	where    protocol.Where
	counters *Counters
	ps       *pendingSegment // set by Route
}

// Where implements session.Shape.
func (pc *publicCreate) Where() protocol.Where { return pc.where }

// Parent implements session.Shape: an ended segment of this connection; a segment still in
// flight is response_in_progress (409). Over WebSocket, a segment not on the connection whose
// rollout is parked in the shared store is claimed from there first (claimParked): it is then
// on the connection, and Route takes the hot path as for a local one.
func (pc *publicCreate) Parent(cr *session.Create) ([]protocol.Item, bool, error) {
	chain, found, err := pc.local(cr)
	if found || err != nil || pc.where != protocol.PublicWebSocket || !pc.r.claimParked(cr.Parent) {
		return chain, found, err
	}
	return pc.local(cr)
}

// local is Parent among the connection's segments.
func (pc *publicCreate) local(cr *session.Create) ([]protocol.Item, bool, error) {
	r := pc.r
	r.mu.Lock()
	inflight := r.inflight[cr.Parent] != nil // asked first: a segment is kept before it leaves inflight
	r.mu.Unlock()
	if inflight {
		return nil, false, protocol.Errorf(http.StatusConflict, protocol.CodeResponseInProgress, "previous_response_id",
			"Previous response with id '%s' has not finished yet: send the continuation after its terminal event.", cr.Parent)
	}
	parent := r.endedSegment(cr.Parent)
	if parent == nil {
		return nil, false, nil
	}
	// A rollout suspends with every call it made and its chain leaves open pending: unless the
	// client left a call of its own open (unlisted), an input that is exactly their outputs
	// (then messages) continues the chain, so the walk of the whole chain
	// (protocol.CheckContinuation) can be skipped, and the hot path stays flat.
	cr.Answered = parent.suspended && !parent.unlisted && session.CheckOutputs(parent.pending, cr.Params.Input) == nil
	return parent.chain, true, nil
}

// Rejected implements session.Shape: a failed continuation evicts its parent, unless it
// forked from another lane (a failed fork keeps its parent).
func (pc *publicCreate) Rejected(cr *session.Create) {
	if parent := pc.r.peek(cr.Parent); parent != nil && parent.lane == cr.Lane {
		pc.r.conn.ForgetResponse(parent.id)
	}
}

// Route implements session.Shape. It takes the hot path when the parent is the latest
// segment of a suspended rollout of this connection, the input answers exactly its pending
// calls (then messages) and the settings are unchanged (cold); otherwise the segment runs on
// a new rollout. Either way the segment is recorded as in flight and as the next one of its
// rollout; Undo forgets it.
func (pc *publicCreate) Route(cr *session.Create) session.Route {
	r, p := pc.r, cr.Params
	ps := pc.ps
	if ps == nil {
		settings := encodeSettings(&cr.Response)
		ps = &pendingSegment{
			seg:      &segment{id: cr.ID, settings: settings.Key(), lane: cr.Lane},
			resp:     cr.Response,
			settings: settings,
			input:    p.Input,
			store:    p.Stored(),
			warmup:   !p.Generates(),
			parent:   cr.Parent,
			emitter:  pc.em,
			counters: pc.counters,
			done:     make(chan struct{}),
		}
		pc.ps = ps
	}
	if cr.Parent == "" {
		ps.path = &pc.counters.New
	} else if cr.Cold == nil {
		parent := r.peek(cr.Parent) // immutable once ended, but for steered
		var steered []protocol.Item
		if parent != nil {
			r.mu.Lock()
			steered = parent.steered
			r.mu.Unlock()
		}
		if parent == nil {
			cr.Cold = coldFor(protocol.ColdNotSuspended) // evicted since Parent
		} else if cr.Cold = r.cold(parent, ps, p); cr.Cold == nil {
			if r.conn.TakeLatest(parent.rollout, parent.id) {
				return r.hot(ps, parent.rollout)
			}
			cr.Cold = coldFor(protocol.ColdNotLatest) // another continuation resumed it first
		}
		if cr.Cold != nil && len(steered) > 0 { // steers held for this continuation follow its tool outputs
			p.Input = append(append([]protocol.Item(nil), p.Input...), steered...)
			ps.input = p.Input
		}
	}
	if cr.Cold != nil {
		ps.path, ps.cold = &pc.counters.Cold, cr.Cold
	}
	// A new rollout: its chain was walked (or is new), so only a call of input can be left open.
	ps.seg.unlisted = leavesClientCallOpen(p.Input)
	key := ps.seg.id
	ps.seg.rollout = key
	r.mu.Lock()
	r.next[key] = ps
	r.acceptLocked(ps)
	r.mu.Unlock()
	return session.Route{Sink: &rolloutSink{owner: r, key: key}, SuspendOnAnswer: true, StartSuspended: ps.warmup,
		Undo: func() bool {
			r.mu.Lock()
			delete(r.next, key)
			delete(r.inflight, ps.seg.id)
			r.mu.Unlock()
			return false
		}}
}

// hot routes ps to resume the suspended rollout key, whose latest segment it has taken
// (session.Conn.TakeLatest). Its Undo reports whether the rollout ended meanwhile and its sink
// answered ps.
func (r *registry) hot(ps *pendingSegment, key string) session.Route {
	ps.seg.rollout = key
	ps.path = &ps.counters.Hot
	r.mu.Lock()
	r.next[key] = ps
	r.acceptLocked(ps)
	r.mu.Unlock()
	return session.Route{Resume: key, Undo: func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.next[key] != ps {
			return true // the rollout ended meanwhile and answered this segment
		}
		delete(r.next, key)
		delete(r.inflight, ps.seg.id)
		return false
	}}
}

// coldFor is the cold path's continuation for reason.
func coldFor(reason string) *protocol.Continuation {
	return &protocol.Continuation{Path: protocol.ContinuationCold, Reason: reason}
}

// acceptLocked records ps as in flight until its terminal event.
func (r *registry) acceptLocked(ps *pendingSegment) { r.inflight[ps.seg.id] = ps }

// cold says why ps cannot resume parent's rollout (the hot path), or nil when it can: the
// parent must be the latest segment of its suspended rollout (asked of the rollout,
// session.Conn.Latest), of the same lane (a fork from another lane takes the cold path with a
// copy of the chain, docs/append-protocol.md, lanes), the create no warm-up, the settings the
// parent's, and the input exactly one output per pending call, then messages.
func (r *registry) cold(parent *segment, ps *pendingSegment, p *protocol.CreateParams) *protocol.Continuation {
	if latest, live := r.conn.Latest(parent.rollout); latest != parent.id {
		if live {
			return coldFor(protocol.ColdNotLatest) // the rollout went on past the parent
		}
		return coldFor(protocol.ColdNotSuspended)
	}
	if parent.lane != ps.seg.lane {
		return coldFor(protocol.ColdOtherLane)
	}
	if ps.warmup {
		return coldFor(protocol.ColdWarmUp)
	}
	if !sameSettings(parent.settings, ps.seg.settings) {
		c := coldFor(protocol.ColdSettingsDiffer)
		c.Setting = settingDiff(parent.settings, ps.seg.settings)
		return c
	}
	if session.CheckOutputs(parent.pending, p.Input) != nil {
		return coldFor(protocol.ColdInput)
	}
	return nil
}

// leavesClientCallOpen reports whether input makes a function_call of its own that it does
// not answer. protocol.CheckContinuation accepts such a call and demands its output from the
// next continuation; every other call a walked continuation's chain leaves open is answered
// by input, so only input needs looking at.
func leavesClientCallOpen(input []protocol.Item) bool {
	var own map[string]bool // calls input makes: true while unanswered
	for i := range input {
		switch it := &input[i]; it.Type {
		case protocol.ItemFunctionCall:
			if own == nil {
				own = map[string]bool{}
			}
			own[it.CallID] = true
		case protocol.ItemFunctionCallOutput:
			if own[it.CallID] {
				own[it.CallID] = false
			}
		}
	}
	for _, open := range own {
		if open {
			return true
		}
	}
	return false
}
