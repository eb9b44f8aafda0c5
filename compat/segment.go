package compat

import (
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// segment is one public Response: the part of a rollout between two
// suspensions, with its own id and sequence_number space.
type segment struct {
	// Immutable once the segment has ended
	id       string
	rollout  string // the session key of its rollout
	lane     string // stream_id of its create; "" is the default lane
	settings []byte // settingsKey of its request
	chain    []protocol.Item
	pending  []string        // call_ids left open at its end
	steered  []protocol.Item // input of steers pending on its calls (response.steer.pending): a cold continuation appends it
	bytes    int64           // estimate of the items this segment added (input + output)
}

// segments is a connection's registry of ended segments, bounded by a count and a byte
// estimate, least recently used first (one session.Recent); the connection's newest segment is
// never evicted. Evicting the latest segment of a suspended rollout ends that rollout
// (silently): nothing can reach it any more. It is guarded by its owner's mutex.
type segments struct {
	maxCount int
	maxBytes int64
	ended    *session.Recent[*segment]
	newest   string
	// latest maps a rollout key to its latest segment while the rollout is suspended after it
	// (the hot path's condition).
	latest map[string]string
}

func newSegments(maxCount int, maxBytes int64) *segments {
	return &segments{maxCount: maxCount, maxBytes: maxBytes, ended: session.NewRecent[*segment](), latest: make(map[string]string)}
}

// get returns segment id, a use (it becomes the most recently used), or nil.
func (s *segments) get(id string) *segment {
	seg, _ := s.ended.Get(id)
	return seg
}

// peek returns segment id without a use, or nil.
func (s *segments) peek(id string) *segment {
	seg, _ := s.ended.Peek(id)
	return seg
}

// put adds seg and returns the rollouts whose latest segment was evicted to make room, and
// how many segments were evicted.
func (s *segments) put(seg *segment) (orphans []string, evicted int) {
	s.ended.Put(seg.id, seg, seg.bytes)
	s.newest = seg.id
	return s.evict()
}

// remove forgets id and reports whether it was the latest segment of a suspended rollout.
func (s *segments) remove(id string) (seg *segment, wasLatest bool) {
	seg, ok := s.ended.Remove(id)
	if !ok {
		return nil, false
	}
	if s.latest[seg.rollout] == id {
		delete(s.latest, seg.rollout)
		wasLatest = true
	}
	return seg, wasLatest
}

// isLatest reports whether seg is the latest segment of a suspended rollout.
func (s *segments) isLatest(seg *segment) bool { return s.latest[seg.rollout] == seg.id }

// evict removes the least recently used segments while the registry is over a bound. The
// newest segment, just put, is the most recently used: it goes only when it is the last.
func (s *segments) evict() (orphans []string, evicted int) {
	for s.ended.Len() > s.maxCount || s.ended.Bytes() > s.maxBytes {
		id, _, ok := s.ended.Oldest()
		if !ok || id == s.newest {
			return orphans, evicted
		}
		evicted++
		if seg, wasLatest := s.remove(id); wasLatest {
			orphans = append(orphans, seg.rollout)
		}
	}
	return orphans, evicted
}
