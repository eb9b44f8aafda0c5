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
// never evicted. Whether a segment is the latest of its suspended rollout is asked of the
// rollout (session.Conn.Latest): the owner tells the connection of every segment it evicts
// (session.Conn.ForgetResponse), which ends a rollout that nothing can reach any more. It is
// guarded by its owner's mutex.
type segments struct {
	maxCount int
	maxBytes int64
	ended    *session.Recent[*segment]
	newest   string
}

func newSegments(maxCount int, maxBytes int64) *segments {
	return &segments{maxCount: maxCount, maxBytes: maxBytes, ended: session.NewRecent[*segment]()}
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

// put adds seg and returns the segments evicted to make room, least recently used first.
func (s *segments) put(seg *segment) (evicted []*segment) {
	s.ended.Put(seg.id, seg, seg.bytes)
	s.newest = seg.id
	return s.evict()
}

// remove forgets id and returns its segment, or nil when it was not there.
func (s *segments) remove(id string) *segment {
	seg, _ := s.ended.Remove(id)
	return seg
}

// evict removes the least recently used segments while the registry is over a bound, at O(1)
// each. The newest segment, just put, is the most recently used: it goes only when it is the
// last.
func (s *segments) evict() (evicted []*segment) {
	for s.ended.Len() > s.maxCount || s.ended.Bytes() > s.maxBytes {
		id, seg, ok := s.ended.Oldest()
		if !ok || id == s.newest {
			return evicted
		}
		s.ended.Remove(id)
		evicted = append(evicted, seg)
	}
	return evicted
}
