package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// benchResponses is how many responses the FindItems benchmarks store, each with two input
// messages and a message and a function call of output, half of them another owner's.
const benchResponses = 10000

// fillForFind stores benchResponses responses in s, alternating owners "a" and "b".
func fillForFind(b *testing.B, s store.Store) {
	ctx := context.Background()
	for i := range benchResponses {
		id := fmt.Sprintf("resp_%05d", i)
		owner := "a"
		if i%2 == 1 {
			owner = "b"
		}
		r := &store.Response{Owner: owner, Input: []protocol.Item{
			{Type: protocol.ItemMessage, ID: "msg_" + id + "_0", Role: "user", Content: []protocol.ContentPart{{Type: "input_text", Text: "question one of " + id}}},
			{Type: protocol.ItemMessage, ID: "msg_" + id + "_1", Role: "user", Content: []protocol.ContentPart{{Type: "input_text", Text: "question two of " + id}}},
		}}
		r.Response = protocol.Response{ID: id, Object: "response", Status: protocol.ResponseCompleted, Model: "sim", Output: []protocol.Item{
			{Type: protocol.ItemMessage, ID: "msg_" + id + "_out", Role: "assistant", Content: []protocol.ContentPart{{Type: "output_text", Text: "answer of " + id}}},
			{Type: protocol.ItemFunctionCall, ID: "fc_" + id, CallID: "call_" + id, Name: "exec", Arguments: `{"cmd":"ls"}`},
		}}
		if err := s.Put(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// benchFind runs FindItems of owner "a" for refs ids (spread over its responses; the last
// one held by no response when miss) per iteration, checking the answer.
func benchFind(b *testing.B, s store.Store, refs int, miss bool) {
	ids := make([]string, refs)
	for i := range ids {
		n := (i * 2 * (benchResponses / 2 / refs)) % benchResponses // owner a's: even numbers
		ids[i] = fmt.Sprintf("fc_resp_%05d", n)
	}
	want := refs
	if miss {
		ids[refs-1] = "fc_nope"
		want--
	}
	ctx := context.Background()
	if found, err := store.FindItems(ctx, s, ids, "a"); err != nil || len(found) != want {
		b.Fatalf("found %d of %d: %v", len(found), want, err)
	}
	b.ResetTimer()
	for b.Loop() {
		if found, err := store.FindItems(ctx, s, ids, "a"); err != nil || len(found) != want {
			b.Fatalf("found %d of %d: %v", len(found), want, err)
		}
	}
}

func benchFindCases(b *testing.B, s store.Store) {
	for _, c := range []struct {
		refs int
		miss bool
	}{{1, false}, {100, false}, {1, true}} {
		name := fmt.Sprintf("refs=%d", c.refs)
		if c.miss {
			name = "miss"
		}
		b.Run(name, func(b *testing.B) { benchFind(b, s, c.refs, c.miss) })
	}
}

// BenchmarkFindItemsMemory: FindItems in a Memory store of 10,000 responses (two owners), for
// 1 and 100 references and for 1 reference to an item no response holds.
func BenchmarkFindItemsMemory(b *testing.B) {
	s := store.NewMemory(0, 0)
	fillForFind(b, s)
	benchFindCases(b, s)
}

// BenchmarkFindItemsRedis is BenchmarkFindItemsMemory against a real redis-server (skipped
// without one).
func BenchmarkFindItemsRedis(b *testing.B) {
	srv := redistest.Start(b)
	s, err := store.NewRedis(context.Background(), srv.URL(), store.RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fillForFind(b, s)
	benchFindCases(b, s)
}

// BenchmarkPutMemory: Put into a full Memory store of 10,000 responses (each Put evicts the
// least recently used), what the item index adds to.
func BenchmarkPutMemory(b *testing.B) {
	s := store.NewMemory(benchResponses, 0)
	fillForFind(b, s)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("put_%d", i)
		v := store.Response{Owner: "a", Input: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_" + id + "_0"}, {Type: protocol.ItemMessage, ID: "msg_" + id + "_1"}}}
		v.Response = protocol.Response{ID: "resp_" + id, Output: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_" + id + "_out"}, {Type: protocol.ItemFunctionCall, ID: "fc_" + id}}}
		if err := s.Put(ctx, &v); err != nil {
			b.Fatal(err)
		}
	}
}
