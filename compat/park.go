package compat

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// This file lets public-shape rollouts park (session.Limits.ParkAfter): a rollout suspended
// behind a completed segment gives up its goroutine, and a hot continuation of its latest
// segment (previous_response_id) continues it from its parked state, as hot as a live one.
//
// With a shared store (session.Options.Parker) the parked state also goes to the store, under
// the id of the latest segment (parkedID), when the rollout parks and on a drain: a
// continuation on a connection that does not hold the segment, on any instance, claims it
// (session.Conn.ClaimParked) and rebuilds the segment from it (adoptParked), then takes the
// hot path as on the rollout's own connection.

// parkedSink is the state of a parked rolloutSink. Between segments the sink holds no segment
// of its own: only the output_index base of the next one and the segment that ended last
// (steer events after its terminal event continue its sequence).
type parkedSink struct {
	OutBase int    `json:"out_base"`
	Last    string `json:"last,omitempty"` // the id of the segment that ended last
	LastSeq int    `json:"last_seq,omitempty"`
	// Stored is the store flag of the segment that ended last; Latest: that segment is the
	// latest of the suspended rollout (a continuation of it takes the hot path).
	Stored bool `json:"stored,omitempty"`
	Latest bool `json:"latest,omitempty"`
	// Segment, in the state for the store (SharedParkState), is what the registry of another
	// connection needs to record that segment (adoptParked); its chain is the rollout's
	// context.
	Segment *parkedSegment `json:"segment,omitempty"`
}

// parkedSegment is the part of a segment, besides its id and chain, that a continuation needs.
type parkedSegment struct {
	Lane     string   `json:"lane,omitempty"`
	Settings []byte   `json:"settings"` // the settings key, compared byte for byte
	Pending  []string `json:"pending"`
	Bytes    int64    `json:"bytes"`
}

// parkedIDPrefix namespaces the public shape's ids among the store's parked rollouts, so that
// an append-shape claim (keyed by a Response id) never takes a public-shape value.
const parkedIDPrefix = "public:"

// parkedID is the store id of a rollout parked behind the segment id.
func parkedID(segment string) string { return parkedIDPrefix + segment }

func (s *rolloutSink) parkState() parkedSink {
	p := parkedSink{OutBase: s.outBase, LastSeq: s.lastSeq, Latest: s.lastLatest}
	if s.last != nil {
		p.Last, p.Stored = s.last.seg.id, s.last.store
	}
	return p
}

// ParkState implements session.ParkableSink.
func (s *rolloutSink) ParkState() json.RawMessage {
	b, _ := json.Marshal(s.parkState()) // ints, bools and a string always encode
	return b
}

// SharedParkState implements session.SharedParkSink: the rollout is continued by the id of
// its latest segment; one with no latest segment (it ended, failed to store, or was evicted)
// cannot be, and stays in memory.
func (s *rolloutSink) SharedParkState() (id string, stored bool, state json.RawMessage) {
	p := s.parkState()
	if s.last != nil && s.lastLatest {
		seg := s.last.seg // immutable once ended
		p.Segment = &parkedSegment{Lane: seg.lane, Settings: seg.settings, Pending: seg.pending, Bytes: seg.bytes}
		id, stored = parkedID(seg.id), p.Stored
	}
	b, err := json.Marshal(p)
	if err != nil { // a struct of strings, ints and bools: it always encodes
		return "", false, s.ParkState()
	}
	return id, stored, b
}

// unparkSink implements session.UnparkSink for the registry's WebSocket connection: the
// rolloutSink that continues the parked rollout key.
func (r *registry) unparkSink(key, latest string, state json.RawMessage, kept func(string) (any, bool)) (session.Sink, error) {
	var p parkedSink
	if err := json.Unmarshal(state, &p); err != nil {
		return nil, fmt.Errorf("compat: parked sink state: %w", err)
	}
	s := &rolloutSink{owner: r, key: key, outBase: p.OutBase, lastSeq: p.LastSeq}
	if p.Last != "" {
		v, _ := kept(p.Last)
		seg, _ := v.(*segment)
		s.lastLatest = seg != nil && p.Latest && latest == seg.id
		if seg != nil {
			s.last = &pendingSegment{seg: seg, store: p.Stored, emitter: &wsEmitter{c: r.conn, lane: seg.lane}, done: make(chan struct{})}
		}
	}
	return s, nil
}

// claimParked claims from the shared store the rollout parked behind the segment id, when
// the connection does not hold that segment, and records the segment (adoptParked): a
// continuation of it then takes the hot path. It reports whether it did; when not (nothing
// in the store, or an error the connection's log has), the continuation goes on as before.
func (r *registry) claimParked(id string) bool {
	ok, err := r.conn.ClaimParked(parkedID(id), r.adoptParked)
	return ok && err == nil
}

// adoptParked implements session.AdoptParked: it records the segment a claimed rollout key
// was parked behind, its chain the rollout's context; that segment is the rollout's latest.
func (r *registry) adoptParked(key string, state json.RawMessage, chain []protocol.Item) (latest string, undo func(), err error) {
	var p parkedSink
	if err := json.Unmarshal(state, &p); err != nil {
		return "", nil, fmt.Errorf("compat: parked sink state: %w", err)
	}
	if p.Last == "" || p.Segment == nil {
		return "", nil, errors.New("compat: the parked state names no segment")
	}
	seg := &segment{id: p.Last, rollout: key, lane: p.Segment.Lane, settings: p.Segment.Settings, chain: chain,
		pending: p.Segment.Pending, bytes: p.Segment.Bytes}
	r.mu.Lock()
	inflight, next := r.inflight[seg.id] != nil, r.next[key] != nil
	r.mu.Unlock()
	if inflight || r.peek(seg.id) != nil {
		return "", nil, fmt.Errorf("compat: response %s is already on this connection", seg.id)
	}
	if next {
		return "", nil, fmt.Errorf("compat: rollout %s is already on this connection", key)
	}
	r.conn.KeepResponse(seg.id, key, chain, seg.bytes, seg)
	return seg.id, func() { r.conn.ForgetResponse(seg.id) }, nil
}
