package compat

import (
	"github.com/tetherd/tether/protocol"
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
	stamp    uint64
}

// segments is a connection's registry of ended segments, bounded by a count and a byte
// estimate, least recently used first; the connection's newest segment is never evicted.
// Evicting the latest segment of a suspended rollout ends that rollout
// (silently): nothing can reach it any more. It is guarded by its owner's mutex.
type segments struct {
	maxCount int
	maxBytes int64
	byID     map[string]*segment
	bytes    int64
	stamp    uint64
	newest   string
	// latest maps a rollout key to its latest segment while the rollout is suspended after it
	// (the hot path's condition).
	latest map[string]string
}

func newSegments(maxCount int, maxBytes int64) *segments {
	return &segments{maxCount: maxCount, maxBytes: maxBytes, byID: make(map[string]*segment), latest: make(map[string]string)}
}

func (s *segments) get(id string) *segment {
	seg := s.byID[id]
	if seg != nil {
		s.stamp++
		seg.stamp = s.stamp
	}
	return seg
}

// put adds seg and returns the rollouts whose latest segment was evicted to make room, and
// how many segments were evicted.
func (s *segments) put(seg *segment) (orphans []string, evicted int) {
	s.stamp++
	seg.stamp = s.stamp
	s.byID[seg.id] = seg
	s.bytes += seg.bytes
	s.newest = seg.id
	return s.evict()
}

// remove forgets id and reports whether it was the latest segment of a suspended rollout.
func (s *segments) remove(id string) (seg *segment, wasLatest bool) {
	seg = s.byID[id]
	if seg == nil {
		return nil, false
	}
	delete(s.byID, id)
	s.bytes -= seg.bytes
	if s.latest[seg.rollout] == id {
		delete(s.latest, seg.rollout)
		wasLatest = true
	}
	return seg, wasLatest
}

// isLatest reports whether seg is the latest segment of a suspended rollout.
func (s *segments) isLatest(seg *segment) bool { return s.latest[seg.rollout] == seg.id }

func (s *segments) evict() (orphans []string, evicted int) {
	for len(s.byID) > s.maxCount || s.bytes > s.maxBytes {
		var oldest *segment
		for _, seg := range s.byID {
			if seg.id == s.newest {
				continue
			}
			if oldest == nil || seg.stamp < oldest.stamp {
				oldest = seg
			}
		}
		if oldest == nil {
			return orphans, evicted
		}
		evicted++
		if _, wasLatest := s.remove(oldest.id); wasLatest {
			orphans = append(orphans, oldest.rollout)
		}
	}
	return orphans, evicted
}
