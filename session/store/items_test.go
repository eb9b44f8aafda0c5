package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
)

// TestFindItem: Memory and Guarded find an input or output item of the owner's responses only.
func TestFindItem(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(0, 0)
	_ = m.Put(ctx, &Response{Owner: "a", Input: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_in"}},
		Response: protocol.Response{ID: "resp_1", Output: []protocol.Item{{Type: protocol.ItemFunctionCall, ID: "fc_1", CallID: "call_1"}}}})
	for _, s := range []Store{m, Guard(m, time.Second, nil)} {
		if it, err := FindItem(ctx, s, "fc_1", "a"); err != nil || it.CallID != "call_1" {
			t.Fatalf("output item: %+v %v", it, err)
		}
		if _, err := FindItem(ctx, s, "msg_in", "a"); err != nil {
			t.Fatalf("input item: %v", err)
		}
		if _, err := FindItem(ctx, s, "fc_1", "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another owner's item: %v", err)
		}
	}
	if _, err := FindItem(ctx, nil, "fc_1", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("nil store: %v", err)
	}
}

// TestFindItems: one call finds every wanted id of the owner's responses (input and output
// items, across responses, ids repeated), leaves out ids it does not hold and another owner's,
// and finds nothing in a nil store.
func TestFindItems(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(0, 0)
	for i := range 50 {
		_ = m.Put(ctx, &Response{Owner: "a", Input: []protocol.Item{{Type: protocol.ItemMessage, ID: fmt.Sprintf("msg_%d", i)}},
			Response: protocol.Response{ID: fmt.Sprintf("resp_%d", i), Output: []protocol.Item{{Type: protocol.ItemFunctionCall,
				ID: fmt.Sprintf("fc_%d", i), CallID: fmt.Sprintf("call_%d", i)}}}})
	}
	_ = m.Put(ctx, &Response{Owner: "b", Response: protocol.Response{ID: "resp_b", Output: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_b"}}}})
	ids := []string{"fc_49", "msg_0", "fc_49", "fc_nope", "msg_b", "fc_7"}
	for _, s := range []Store{m, Guard(m, time.Second, nil)} {
		found, err := FindItems(ctx, s, ids, "a")
		if err != nil || len(found) != 3 || found["fc_49"].CallID != "call_49" || found["fc_7"].CallID != "call_7" ||
			found["msg_0"].Type != protocol.ItemMessage {
			t.Fatalf("found %+v, %v", found, err)
		}
	}
	if found, err := FindItems(ctx, nil, ids, "a"); err != nil || len(found) != 0 {
		t.Fatalf("nil store: %+v %v", found, err)
	}
}

// TestMemoryItemIndexEmpties: the item index forgets every entry that leaves the store
// (replaced, evicted, deleted), also when several entries hold one id, so it holds nothing
// once the store does.
func TestMemoryItemIndexEmpties(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(5, 0)
	shared := protocol.Item{Type: protocol.ItemMessage, ID: "msg_shared"}
	for i := range 20 {
		r := &Response{Owner: fmt.Sprintf("o%d", i%2), Input: []protocol.Item{shared, {Type: protocol.ItemMessage, ID: fmt.Sprintf("msg_%d", i)}},
			Response: protocol.Response{ID: fmt.Sprintf("resp_%d", i%8), Output: []protocol.Item{shared, {Type: protocol.ItemFunctionCall, ID: fmt.Sprintf("fc_%d", i)}}}}
		if err := m.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got := m.indexed(); got != m.Len()*3 {
			t.Fatalf("after Put %d: %d (entry, id) pairs indexed for %d responses, want 3 each", i, got, m.Len())
		}
	}
	if _, err := FindItem(ctx, m, "msg_shared", "o1"); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		_ = m.Delete(ctx, fmt.Sprintf("resp_%d", i), "o0")
		_ = m.Delete(ctx, fmt.Sprintf("resp_%d", i), "o1")
	}
	if m.Len() != 0 || len(m.items) != 0 {
		t.Fatalf("%d responses, %d ids indexed after deleting all, want none", m.Len(), len(m.items))
	}
}

// indexed counts the (entry, distinct id) pairs of the item index.
func (s *Memory) indexed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.items {
		n += 1 + len(h.more)
	}
	return n
}
