package store

import (
	"context"
	"errors"
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
