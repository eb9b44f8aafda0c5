package compat

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/store"
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

// create handles one response.create (WebSocket) or POST body (HTTP). It returns a
// request-scoped error, in which case nothing was started and no event was sent, or the
// segment, whose done channel closes once its terminal event has been sent.
func (r *registry) create(p *protocol.CreateParams, em emitter, ws bool, counters *Counters) (*pendingSegment, error) {
	where := protocol.PublicHTTP
	if ws {
		where = protocol.PublicWebSocket
	}
	lane := p.LaneOf() // every error but invalid_stream_id carries the lane
	if !ws {
		lane = "" // HTTP has no lanes (stream_id is unsupported_parameter there)
	}
	if err := session.CheckFormat(p); err != nil {
		return nil, protocol.InLane(err, lane)
	}
	if err := protocol.CheckCreate(p, where); err != nil {
		return nil, protocol.InLane(err, lane)
	}
	ps, err := r.createIn(p, em, ws, counters, lane)
	return ps, protocol.InLane(err, lane)
}

// createIn is create after the checks that cannot be attributed to a lane; lane is the
// create's stream_id.
func (r *registry) createIn(p *protocol.CreateParams, em emitter, ws bool, counters *Counters, lane string) (*pendingSegment, error) {
	input, err := r.resolveRefs(p.Input)
	if err == nil {
		input, err = r.conn.ExpandCompactions(input)
	}
	if err != nil {
		return nil, err
	}
	p.Input = input
	if err := r.conn.CheckModel(p); err != nil { // the backend sees the items it will get
		return nil, err
	}
	id := protocol.NewID("resp")
	ps := &pendingSegment{
		seg:     &segment{id: id, settings: settingsKey(p), lane: lane},
		resp:    protocol.NewResponse(id, p, time.Now().Unix()),
		input:   p.Input,
		store:   p.Stored(),
		warmup:  !p.Generates(),
		emitter: em,
		done:    make(chan struct{}),
	}
	ps.counters = counters
	parentID := ""
	if p.PreviousResponseID != nil {
		parentID = *p.PreviousResponseID
	}
	if parentID == "" {
		if err := protocol.CheckContinuation(nil, p.Input); err != nil {
			return nil, err
		}
		ps.path = &counters.New
		return ps, r.start(ps, p, nil)
	}
	ps.parent = parentID
	chain, cold, err := r.resolve(ps, p)
	if err != nil {
		return nil, err
	}
	if cold == nil {
		return ps, nil // counted Hot by resolve
	}
	ps.path, ps.cold = &counters.Cold, cold
	r.conn.LogCold(id, parentID, cold)
	return ps, r.start(ps, p, chain)
}

// runningLocked reports whether a segment of rollout key is in flight.
func (r *registry) runningLocked(key string) bool {
	for _, ps := range r.inflight {
		if ps.seg.rollout == key {
			return true
		}
	}
	return false
}

// coldFor is the cold path's continuation for reason.
func coldFor(reason string) *protocol.Continuation {
	return &protocol.Continuation{Path: protocol.ContinuationCold, Reason: reason}
}

// acceptLocked records ps as in flight until its terminal event.
func (r *registry) acceptLocked(ps *pendingSegment) { r.inflight[ps.seg.id] = ps }

// resolve finds the parent: the connection's segments first, then the store. It validates
// the continuation, and takes the hot path when the parent is the latest segment of a
// suspended rollout, the input answers exactly its pending calls (then messages) and the
// settings are unchanged. A failed continuation evicts its parent. cold is nil on the hot path,
// else it says why the continuation is rebuilt from chain.
func (r *registry) resolve(ps *pendingSegment, p *protocol.CreateParams) (chain []protocol.Item, cold *protocol.Continuation, _ error) {
	r.mu.Lock()
	parent := r.segs.get(ps.parent)
	if parent == nil && r.inflight[ps.parent] != nil {
		r.mu.Unlock()
		return nil, nil, protocol.Errorf(http.StatusConflict, protocol.CodeResponseInProgress, "previous_response_id",
			"Previous response with id '%s' has not finished yet: send the continuation after its terminal event.", ps.parent)
	}
	if parent == nil {
		r.mu.Unlock()
		return r.fromStore(ps.parent, p.Input)
	}
	chain = parent.chain
	if err := protocol.CheckContinuation(chain, p.Input); err != nil {
		if parent.lane == ps.seg.lane { // a failed fork keeps its parent
			r.evictLocked(parent.id)
		}
		r.mu.Unlock()
		return nil, nil, err
	}
	if cold = r.coldLocked(parent, ps, p); cold != nil {
		if len(parent.steered) > 0 { // steers held for this continuation follow its tool outputs
			p.Input = append(append([]protocol.Item(nil), p.Input...), parent.steered...)
			ps.input = p.Input
		}
		r.mu.Unlock()
		return chain, cold, nil
	}
	key := parent.rollout
	delete(r.segs.latest, key)
	ps.seg.rollout = key
	ps.path = &ps.counters.Hot
	r.next[key] = ps
	r.acceptLocked(ps)
	r.mu.Unlock()
	if err := r.conn.Resume(key, p.Input); err != nil {
		r.mu.Lock()
		taken := r.next[key] != ps // the rollout ended meanwhile and answered this segment
		if !taken {
			delete(r.next, key)
			delete(r.inflight, ps.seg.id)
		}
		r.mu.Unlock()
		if taken {
			return nil, nil, nil
		}
		if e, ok := protocol.AsError(err); ok {
			switch e.Code {
			case protocol.CodeResponseNotSuspended, protocol.CodeResponseNotFound:
				return chain, coldFor(protocol.ColdNotSuspended), nil // the rollout ended meanwhile: rebuild it
			}
		}
		return nil, nil, err
	}
	return nil, nil, nil
}

// coldLocked says why ps cannot resume parent's rollout (the hot path), or nil when it can:
// the parent must be the latest segment of a suspended rollout, of the same lane (a fork from
// another lane takes the cold path with a copy of the chain, docs/append-protocol.md, lanes),
// the create no warm-up, the settings the parent's, and the input exactly one output per
// pending call, then messages.
func (r *registry) coldLocked(parent *segment, ps *pendingSegment, p *protocol.CreateParams) *protocol.Continuation {
	if !r.segs.isLatest(parent) {
		if _, suspended := r.segs.latest[parent.rollout]; suspended || r.runningLocked(parent.rollout) {
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
	if sampler.CheckOutputs(parent.pending, nil, p.Input) != nil {
		return coldFor(protocol.ColdInput)
	}
	return nil
}

// fromStore resolves a parent that is not on the connection from the Store (the cold path),
// in one Chain call under the store's timeout: previous_response_not_found when it is not
// stored (or not the owner's; naming the missing response of its chain), store_unavailable
// when the store fails.
func (r *registry) fromStore(parent string, input []protocol.Item) ([]protocol.Item, *protocol.Continuation, error) {
	if r.store == nil {
		return nil, nil, session.PreviousNotFound(parent, nil)
	}
	chain, err := r.store.Chain(r.conn.Context(), parent, r.owner)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, session.PreviousNotFound(parent, err)
	case err != nil:
		return nil, nil, session.StoreUnavailable()
	}
	if perr := protocol.CheckContinuation(chain, input); perr != nil {
		return nil, nil, perr
	}
	return chain, coldFor(protocol.ColdNotOnConnection), nil
}

// start runs ps on a new rollout whose context is history (the cold path's chain) + input.
func (r *registry) start(ps *pendingSegment, p *protocol.CreateParams, history []protocol.Item) error {
	key := ps.seg.id
	ps.seg.rollout = key
	r.mu.Lock()
	r.next[key] = ps
	r.acceptLocked(ps)
	r.mu.Unlock()
	err := r.conn.Start(session.StartRequest{Key: key, Config: sampler.Config{
		ID:              key,
		Settings:        sampler.SettingsFrom(p),
		History:         history,
		Input:           p.Input,
		Sink:            &rolloutSink{owner: r, key: key},
		SuspendOnAnswer: true,
		StartSuspended:  ps.warmup,
	}, SettingsBytes: session.SettingsBytes(p), Lane: ps.seg.lane})
	if err != nil {
		r.mu.Lock()
		delete(r.next, key)
		delete(r.inflight, ps.seg.id)
		r.mu.Unlock()
	}
	return err
}
