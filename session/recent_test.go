package session

import (
	"slices"
	"testing"
)

// keys is r's keys, least recently used first.
func keys(r *Recent[int]) []string {
	var out []string
	r.Each(func(v int) bool {
		out = append(out, string(rune('a'+v)))
		return true
	})
	return out
}

// TestRecentOrderAndBytes: Put and Get make an entry the most recently used, Peek does not;
// Oldest is the least recently used; Bytes follows Put (also a replacing one) and Remove.
func TestRecentOrderAndBytes(t *testing.T) {
	r := NewRecent[int]()
	r.Put("a", 0, 10)
	r.Put("b", 1, 20)
	r.Put("c", 2, 30)
	if got := keys(r); !slices.Equal(got, []string{"a", "b", "c"}) || r.Bytes() != 60 || r.Len() != 3 {
		t.Fatalf("after three puts: %v, %d bytes, %d entries", got, r.Bytes(), r.Len())
	}
	if v, ok := r.Get("a"); !ok || v != 0 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	if _, ok := r.Peek("b"); !ok {
		t.Fatal("Peek(b): missing")
	}
	if k, v, ok := r.Oldest(); !ok || k != "b" || v != 1 {
		t.Fatalf("Oldest = %s %d %v, want b (Get made a the most recent, Peek left b)", k, v, ok)
	}
	r.Put("b", 1, 5) // replaced: the most recent, with its new size
	if got := keys(r); !slices.Equal(got, []string{"c", "a", "b"}) || r.Bytes() != 45 {
		t.Fatalf("after replacing b: %v, %d bytes", got, r.Bytes())
	}
	if v, ok := r.Remove("c"); !ok || v != 2 || r.Bytes() != 15 {
		t.Fatalf("Remove(c) = %d %v, %d bytes left", v, ok, r.Bytes())
	}
	if _, ok := r.Remove("c"); ok {
		t.Fatal("second Remove(c) found it")
	}
	r.Remove("a")
	r.Remove("b")
	if _, _, ok := r.Oldest(); ok || r.Len() != 0 || r.Bytes() != 0 {
		t.Fatalf("empty: %d entries, %d bytes", r.Len(), r.Bytes())
	}
}
