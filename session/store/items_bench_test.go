package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

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
		owner := "a"
		if i%2 == 1 {
			owner = "b"
		}
		if err := s.Put(ctx, benchResponse(fmt.Sprintf("%05d", i), owner)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchResponse is the stored response resp_<n> of owner: two input messages, an output
// message and a function call.
func benchResponse(n, owner string) *store.Response {
	id := "resp_" + n
	r := &store.Response{Owner: owner, Input: []protocol.Item{
		{Type: protocol.ItemMessage, ID: "msg_" + id + "_0", Role: "user", Content: []protocol.ContentPart{{Type: "input_text", Text: "question one of " + id}}},
		{Type: protocol.ItemMessage, ID: "msg_" + id + "_1", Role: "user", Content: []protocol.ContentPart{{Type: "input_text", Text: "question two of " + id}}},
	}}
	r.Response = protocol.Response{ID: id, Object: "response", Status: protocol.ResponseCompleted, Model: "sim", Output: []protocol.Item{
		{Type: protocol.ItemMessage, ID: "msg_" + id + "_out", Role: "assistant", Content: []protocol.ContentPart{{Type: "output_text", Text: "answer of " + id}}},
		{Type: protocol.ItemFunctionCall, ID: "fc_" + id, CallID: "call_" + id, Name: "exec", Arguments: `{"cmd":"ls"}`},
	}}
	return r
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
	// A miss while the index is not known complete (just after an upgrade) walks every stored
	// response once.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	b.Run("miss_walk", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if err := c.Del(ctx, "tether:itemidx").Err(); err != nil {
				b.Fatal(err)
			}
			if found, err := store.FindItems(ctx, s, []string{"fc_nope"}, "a"); err != nil || len(found) != 0 {
				b.Fatalf("found %v: %v", found, err)
			}
		}
	})
}

// BenchmarkPutMemory: Put into a full Memory store of 10,000 responses (each Put evicts the
// least recently used), what the item index adds to.
func BenchmarkPutMemory(b *testing.B) {
	s := store.NewMemory(benchResponses, 0)
	fillForFind(b, s)
	benchPut(b, s)
}

// BenchmarkPutRedis is BenchmarkPutMemory against a real redis-server (skipped without one),
// then a Get of a stored response (which extends its TTL and its index entries').
func BenchmarkPutRedis(b *testing.B) {
	srv := redistest.Start(b)
	s, err := store.NewRedis(context.Background(), srv.URL(), store.RedisOptions{MaxResponses: benchResponses})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fillForFind(b, s)
	b.Run("put", func(b *testing.B) { benchPut(b, s) })
	b.Run("get", func(b *testing.B) {
		if err := s.Put(context.Background(), benchResponse("get", "a")); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Get(context.Background(), "resp_get", "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPut puts responses of four items each, with new ids, into s.
func benchPut(b *testing.B, s store.Store) {
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if err := s.Put(ctx, benchResponse(fmt.Sprintf("put_%d", i), "a")); err != nil {
			b.Fatal(err)
		}
	}
}
