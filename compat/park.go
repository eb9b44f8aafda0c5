package compat

import (
	"encoding/json"
	"fmt"

	"github.com/tetherd/tether/session"
)

// This file lets public-shape rollouts park (session.Options.ParkAfter): a rollout suspended
// behind a completed segment gives up its goroutine, and a hot continuation of its latest
// segment (previous_response_id) continues it from its parked state, as hot as a live one.

// parkedSink is the state of a parked rolloutSink. Between segments the sink holds no segment
// of its own: only the output_index base of the next one and the segment that ended last
// (steer events after its terminal event continue its sequence).
type parkedSink struct {
	OutBase int    `json:"out_base"`
	Last    string `json:"last,omitempty"` // the id of the segment that ended last
	LastSeq int    `json:"last_seq,omitempty"`
}

// ParkState implements session.ParkableSink.
func (s *rolloutSink) ParkState() json.RawMessage {
	p := parkedSink{OutBase: s.outBase, LastSeq: s.lastSeq}
	if s.last != nil {
		p.Last = s.last.seg.id
	}
	b, _ := json.Marshal(p) // a struct of ints and a string always encodes
	return b
}

// unparkSink implements session.UnparkSink for the registry's WebSocket connection: the
// rolloutSink that continues the parked rollout key.
func (r *registry) unparkSink(key string, state json.RawMessage) (session.Sink, error) {
	var p parkedSink
	if err := json.Unmarshal(state, &p); err != nil {
		return nil, fmt.Errorf("compat: parked sink state: %w", err)
	}
	s := &rolloutSink{owner: r, key: key, outBase: p.OutBase, lastSeq: p.LastSeq}
	if p.Last != "" {
		r.mu.Lock()
		seg := r.segs.peek(p.Last)
		r.mu.Unlock()
		if seg != nil {
			s.last = &pendingSegment{seg: seg, emitter: &wsEmitter{c: r.conn, lane: seg.lane}, done: make(chan struct{})}
		}
	}
	return s, nil
}
