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
		if orphans, n := s.put(seg(id, "r_"+id, 10)); n != 0 || orphans != nil {
			t.Fatalf("put %s under the bound evicted %d (orphans %v)", id, n, orphans)
		}
	}
	if s.get("a") == nil {
		t.Fatal("get a: missing")
	}
	if _, n := s.put(seg("d", "r_d", 10)); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
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
	if _, n := s.put(seg("d", "r", 60)); n != 2 { // 150 bytes: a and b go
		t.Fatalf("evicted %d, want 2", n)
	}
	if got := ids(s); !slices.Equal(got, []string{"c", "d"}) || s.ended.Bytes() != 70 {
		t.Fatalf("segments %v, %d bytes; want [c d], 70", got, s.ended.Bytes())
	}
	if _, n := s.put(seg("e", "r", 30)); n != 0 || s.ended.Bytes() != 100 {
		t.Fatalf("a put up to the bound evicted %d (%d bytes)", n, s.ended.Bytes())
	}
}

// TestSegmentsNewestNeverEvicted: the newest segment stays even when it alone breaks a bound.
func TestSegmentsNewestNeverEvicted(t *testing.T) {
	s := newSegments(1, 50)
	s.put(seg("a", "r", 10))
	if _, n := s.put(seg("big", "r", 500)); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	if got := ids(s); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("segments %v, want [big]", got)
	}
	if orphans, n := s.put(seg("huge", "r", 900)); n != 1 || orphans != nil || s.get("huge") == nil {
		t.Fatalf("the newest segment was evicted or the older one kept: %v, %d", ids(s), n)
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

// TestSegmentsOrphans: evicting or removing the latest segment of a suspended rollout reports
// the rollout (nothing can reach it any more); other segments of it do not.
func TestSegmentsOrphans(t *testing.T) {
	s := newSegments(2, 1<<20)
	s.put(seg("r1_a", "r1", 1))
	s.put(seg("r1_b", "r1", 1))
	s.latest["r1"] = "r1_b" // r1 is suspended after r1_b
	if !s.isLatest(s.peek("r1_b")) || s.isLatest(s.peek("r1_a")) {
		t.Fatal("isLatest")
	}
	if orphans, n := s.put(seg("r2_a", "r2", 1)); n != 1 || orphans != nil {
		t.Fatalf("evicting r1_a (not latest): orphans %v, evicted %d", orphans, n)
	}
	if orphans, n := s.put(seg("r3_a", "r3", 1)); n != 1 || !slices.Equal(orphans, []string{"r1"}) {
		t.Fatalf("evicting r1_b (latest of suspended r1): orphans %v, evicted %d", orphans, n)
	}
	if _, ok := s.latest["r1"]; ok {
		t.Fatal("r1 still has a latest segment after it was evicted")
	}
	s.latest["r3"] = "r3_a"
	if got, wasLatest := s.remove("r3_a"); got == nil || !wasLatest {
		t.Fatalf("remove of the latest segment: %v %v", got, wasLatest)
	}
	if got, wasLatest := s.remove("r2_a"); got == nil || wasLatest {
		t.Fatalf("remove of another segment: %v %v", got, wasLatest)
	}
	if got, wasLatest := s.remove("r2_a"); got != nil || wasLatest {
		t.Fatalf("second remove: %v %v", got, wasLatest)
	}
	if s.ended.Len() != 0 || s.ended.Bytes() != 0 || len(s.latest) != 0 {
		t.Fatalf("after removing everything: %v, %d bytes, latest %v", ids(s), s.ended.Bytes(), s.latest)
	}
}
