package compat

import (
	"encoding/json"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// steer answers response.steer: the response named by previous_response_id
// must be in flight on this connection (queued or sampling), or have been steered (the
// successor in flight at the end of its chain of steered successors then takes the steer). The rollout then takes the steer
// (rolloutSink.SteerAccepted and the events after it); everything else gets
// response.steer.failed here, from the reading goroutine, with sequence_number 0 and the
// lane of the response it names.
func (h *wsHandler) steer(frame json.RawMessage) {
	sp, perr := protocol.DecodeSteer(h.c.Context(), frame)
	if perr != nil && perr.Code == protocol.CodeClientClosed {
		return // the connection is closing: nobody reads a response.steer.failed
	}
	ps, lane, ended := h.r.steerTarget(sp.PreviousResponseID)
	draining, _ := h.c.Draining()
	switch {
	case perr != nil:
		h.steerFailed(sp, lane, perr)
	case ps == nil && ended:
		h.steerFailed(sp, lane, steerError(protocol.CodeAlreadyCompleted, "Response '%s' has already completed: steer the response that continues it.", sp.PreviousResponseID))
	case ps == nil:
		h.steerFailed(sp, lane, steerError(protocol.CodeResponseNotFound, "No active response with id '%s' on this connection.", sp.PreviousResponseID))
	case !h.c.CanSteer():
		h.steerFailed(sp, lane, steerError(protocol.CodeSteeringNotSupported, "Steering is not supported for this response."))
	case ps.warmup:
		h.steerFailed(sp, lane, steerError(protocol.CodeResponseNotActive, "Response '%s' is a warm-up (generate:false): it does not sample.", sp.PreviousResponseID))
	case draining:
		h.steerFailed(sp, lane, steerError(protocol.CodeSuccessorFailed, "The connection is shutting down: a steered response could not be continued."))
	default:
		id := protocol.NewID("steer")
		if err := h.c.Steer(ps.seg.rollout, session.Steer{ID: id, PreviousResponseID: sp.PreviousResponseID, Input: sp.Input}); err != nil {
			e := *protocol.ErrorOf(err)
			if e.Code == protocol.CodeResponseNotFound {
				e.Code = protocol.CodeAlreadyCompleted // the rollout ended meanwhile
			}
			h.steerFailed(sp, lane, &e)
		}
	}
}

// steerTarget finds the segment a steer for id goes to: id's segment while it is in flight, or,
// when id was steered, the successor in flight at the end of its chain of steered successors
// (a burst of steers naming one response follows the rollout across the Responses the earlier
// steers started); ended reports a segment of this connection that has ended. lane is the
// lane of the segment named, when it is known.
func (r *registry) steerTarget(id string) (ps *pendingSegment, lane string, ended bool) {
	if id == "" {
		return nil, "", false
	}
	r.mu.Lock()
	ps = r.inflight[id]
	r.mu.Unlock()
	if ps != nil {
		return ps, ps.seg.lane, false
	}
	seg := r.peek(id) // asked after inflight: a segment is kept before it leaves inflight
	if seg == nil {
		return nil, "", false
	}
	lane = seg.lane
	for range maxSteerHops {
		r.mu.Lock()
		for _, p := range r.inflight {
			if p.successor && p.parent == seg.id {
				r.mu.Unlock()
				return p, p.seg.lane, false
			}
		}
		next := seg.steeredTo
		r.mu.Unlock()
		if next == "" {
			break
		}
		if seg = r.peek(next); seg == nil {
			break // evicted: the steer finds nothing to follow
		}
	}
	return nil, lane, true
}

// maxSteerHops bounds the chain of steered successors a steer follows from the response it
// names (each hop is a lookup and a walk of the responses in flight).
const maxSteerHops = 64

func steerError(code, format string, args ...any) *protocol.Error {
	return protocol.Errorf(400, code, "", format, args...)
}

// steerFailed sends response.steer.failed for a steer that the rollout did not take.
func (h *wsHandler) steerFailed(sp protocol.SteerParams, lane string, e *protocol.Error) {
	ev := protocol.SteerFailed(protocol.SteerEcho("", sp.PreviousResponseID, sp.RawInput), e)
	ev.StreamID = lane
	_ = h.c.Write(protocol.AppendEvent(nil, &ev))
}

// SteerAccepted implements session.SteerSink: response.steer.accepted in the sequence of the
// response the steer was sent for (begun first if it has not sent anything yet), or after the
// terminal event of the one that ended last.
func (s *rolloutSink) SteerAccepted(st session.Steer) {
	s.sendSteer(new(protocol.SteerAccepted(protocol.SteerRef(st.ID, st.PreviousResponseID))))
}

// SteerPending implements session.SteerSink: response.steer.pending after the terminal event
// of the response that stopped for tool output.
func (s *rolloutSink) SteerPending(steers []session.Steer, pending []string) {
	if s.last != nil {
		s.owner.mu.Lock()
		for _, st := range steers {
			s.last.seg.steered = append(s.last.seg.steered, st.Input...)
		}
		s.owner.mu.Unlock()
	}
	for _, st := range steers {
		s.sendSteer(new(protocol.SteerPending(pending, protocol.SteerRef(st.ID, st.PreviousResponseID))))
	}
}

// sendSteer sends a steer event in the current segment's sequence, or after the last one's.
func (s *rolloutSink) sendSteer(ev *protocol.Event) {
	if s.take() {
		s.begin()
		_ = s.send(ev)
		return
	}
	if s.last == nil {
		return
	}
	ev.SequenceNumber = s.lastSeq
	s.lastSeq++
	_ = s.last.emitter.emit(ev)
}

// Steered implements session.SteerSink: the response being sampled ends response.incomplete
// (reason steered) and a successor Response, whose previous_response_id is the steered one,
// takes the rollout on with the steers' input. The successor begins (response.created) with
// its first event.
func (s *rolloutSink) Steered(st session.Steering) {
	if !s.take() {
		return
	}
	s.begin()
	ps := s.cur
	s.outBase += len(st.Output)
	s.finish(ps, protocol.ResponseIncomplete, protocol.ReasonSteered, nil, st.Output, st.StepUsage, st.Context, nil, false)
	var input []protocol.Item
	for _, sr := range st.Steers {
		input = append(input, sr.Input...)
	}
	id := protocol.NewID("resp")
	prev := ps.seg.id
	resp := ps.resp
	resp.ID, resp.CreatedAt, resp.PreviousResponseID = id, time.Now().Unix(), &prev
	succ := &pendingSegment{
		seg:       &segment{id: id, settings: ps.seg.settings, lane: ps.seg.lane, rollout: s.key, unlisted: ps.seg.unlisted},
		resp:      resp,
		settings:  ps.settings,
		input:     input,
		store:     ps.store,
		parent:    prev,
		emitter:   ps.emitter,
		counters:  ps.counters,
		done:      make(chan struct{}),
		successor: true,
	}
	s.owner.mu.Lock()
	s.owner.acceptLocked(succ)
	ps.seg.steeredTo = id
	s.owner.mu.Unlock()
	s.cur, s.seq, s.begun = succ, 0, false
}

var _ session.SteerSink = (*rolloutSink)(nil)
