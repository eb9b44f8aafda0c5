package compat

import (
	"slices"
	"testing"
)

// seg is an ended segment of rollout with an estimate of n bytes.
func seg(id, rollout string, n int64) *segment {
	return &segment{id: id, rollout: rollout, bytes: n}
}

// ids is the registry's segment ids, sorted.
func ids(s *segments) []string {
	var out []string
	s.ended.Each(func(seg *segment) bool {
		out = append(out, seg.id)
		return true
	})
	slices.Sort(out)
	return out
}

// TestSegmentsCountBoundEvictsLeastRecentlyUsed: past the count bound the least recently put
// or got segment goes first; get refreshes a segment.
func TestSegmentsCountBoundEvictsLeastRecentlyUsed(t *testing.T) {
	s := newSegments(3, 1<<20)
	for _, id := range []string{"a", "b", "c"} {
		if gone := s.put(seg(id, "r_"+id, 10)); gone != nil {
			t.Fatalf("put %s under the bound evicted %v", id, segIDs(gone))
		}
	}
	if s.get("a") == nil {
		t.Fatal("get a: missing")
	}
	if gone := s.put(seg("d", "r_d", 10)); !slices.Equal(segIDs(gone), []string{"b"}) {
		t.Fatalf("evicted %v, want [b]", segIDs(gone))
	}
	if got, want := ids(s), []string{"a", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v (b was least recently used)", got, want)
	}
	if s.ended.Bytes() != 30 {
		t.Fatalf("bytes %d, want 30", s.ended.Bytes())
	}
	if s.get("b") != nil {
		t.Fatal("get of an evicted segment")
	}
}

// TestSegmentsByteBound: past the byte bound segments go, least recently used first, until
// the estimate fits; several may go for one put.
func TestSegmentsByteBound(t *testing.T) {
	s := newSegments(100, 100)
	s.put(seg("a", "r", 40))
	s.put(seg("b", "r", 40))
	s.put(seg("c", "r", 10))
	if gone := s.put(seg("d", "r", 60)); !slices.Equal(segIDs(gone), []string{"a", "b"}) { // 150 bytes: a and b go
		t.Fatalf("evicted %v, want [a b]", segIDs(gone))
	}
	if got := ids(s); !slices.Equal(got, []string{"c", "d"}) || s.ended.Bytes() != 70 {
		t.Fatalf("segments %v, %d bytes; want [c d], 70", got, s.ended.Bytes())
	}
	if gone := s.put(seg("e", "r", 30)); gone != nil || s.ended.Bytes() != 100 {
		t.Fatalf("a put up to the bound evicted %v (%d bytes)", segIDs(gone), s.ended.Bytes())
	}
}

// TestSegmentsNewestNeverEvicted: the newest segment stays even when it alone breaks a bound.
func TestSegmentsNewestNeverEvicted(t *testing.T) {
	s := newSegments(1, 50)
	s.put(seg("a", "r", 10))
	if gone := s.put(seg("big", "r", 500)); len(gone) != 1 {
		t.Fatalf("evicted %v, want [a]", segIDs(gone))
	}
	if got := ids(s); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("segments %v, want [big]", got)
	}
	if gone := s.put(seg("huge", "r", 900)); len(gone) != 1 || s.get("huge") == nil {
		t.Fatalf("the newest segment was evicted or the older one kept: %v, evicted %v", ids(s), segIDs(gone))
	}
	// Getting an older segment does not make it the newest.
	s = newSegments(1, 1<<20)
	s.put(seg("x", "r", 1))
	s.get("x")
	s.put(seg("y", "r", 1))
	if got := ids(s); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("segments %v, want [y]", got)
	}
}

// TestSegmentsEvictedCarryTheirRollout: put and remove hand back the segments that left,
// with the rollout each belongs to, so that the connection can end a rollout whose latest
// segment went (session.Conn.ForgetResponse); the registry keeps no state of its own about
// which segment is latest.
func TestSegmentsEvictedCarryTheirRollout(t *testing.T) {
	s := newSegments(2, 1<<20)
	s.put(seg("r1_a", "r1", 1))
	s.put(seg("r1_b", "r1", 1))
	gone := s.put(seg("r2_a", "r2", 1))
	if len(gone) != 1 || gone[0].id != "r1_a" || gone[0].rollout != "r1" {
		t.Fatalf("evicted %v, want r1_a of r1", segIDs(gone))
	}
	if got := s.remove("r1_b"); got == nil || got.rollout != "r1" {
		t.Fatalf("remove r1_b: %v", got)
	}
	if got := s.remove("r1_b"); got != nil {
		t.Fatalf("second remove: %v", got)
	}
	s.remove("r2_a")
	if s.ended.Len() != 0 || s.ended.Bytes() != 0 {
		t.Fatalf("after removing everything: %v, %d bytes", ids(s), s.ended.Bytes())
	}
}

// segIDs is the ids of segs, in order.
func segIDs(segs []*segment) []string {
	var out []string
	for _, seg := range segs {
		out = append(out, seg.id)
	}
	return out
}
