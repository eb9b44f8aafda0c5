package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// openRedis returns a Redis store on srv and a plain client of the same server.
func openRedis(t *testing.T, srv *redistest.Server, o store.RedisOptions) (*store.Redis, *redis.Client) {
	t.Helper()
	s, err := store.NewRedis(context.Background(), srv.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() {
		_ = s.Close()
		_ = c.Close()
	})
	return s, c
}

// itemResponse is a stored response of owner with one input message and one function call.
func itemResponse(id, owner string) *store.Response {
	r := &store.Response{Owner: owner, Input: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_" + id, Role: "user",
		Content: []protocol.ContentPart{{Type: "input_text", Text: "hi from " + id}}}}}
	r.Response = protocol.Response{ID: id, Status: protocol.ResponseCompleted,
		Output: []protocol.Item{{Type: protocol.ItemFunctionCall, ID: "fc_" + id, CallID: "call_" + id, Name: "f", Arguments: "{}"}}}
	return r
}

// putLegacy writes r as a build without the item index did: the response hash without its
// items field, its LRU and size accounting, and a stamp of the clock.
func putLegacy(t *testing.T, c *redis.Client, r *store.Response) {
	t.Helper()
	ctx := context.Background()
	head := r.Response
	head.Output = nil
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	k := "tether:r:" + r.Owner + ":" + r.Response.ID
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	clock := now.UnixMicro()
	if last, err := c.Get(ctx, "tether:clock").Int64(); err == nil && clock <= last {
		clock = last + 1
	}
	if err := c.Set(ctx, "tether:clock", clock, 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, "parent", "", "response", js(head), "output", js(r.Response.Output), "input", js(r.Input))
		p.PExpire(ctx, k, time.Hour)
		p.ZAdd(ctx, "tether:lru", redis.Z{Score: float64(clock), Member: k})
		p.HSet(ctx, "tether:sizes", k, store.Size(r))
		p.IncrBy(ctx, "tether:bytes", store.Size(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRedisFindItemsLegacy: responses an older build stored (no index entries) are found: the
// first miss indexes them and marks the index complete; an older build's later activity is
// noticed, and its responses found too. A complete index answers a miss without a walk.
func TestRedisFindItemsLegacy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, c := openRedis(t, srv, store.RedisOptions{})
	for i := range 300 {
		putLegacy(t, c, itemResponse(fmt.Sprintf("old_%d", i), "a"))
	}
	if err := s.Put(ctx, itemResponse("new_1", "a")); err != nil {
		t.Fatal(err)
	}
	found, err := store.FindItems(ctx, s, []string{"fc_new_1", "fc_old_7", "msg_old_299", "fc_nope"}, "a")
	if err != nil || len(found) != 3 || found["fc_old_7"].CallID != "call_old_7" || found["msg_old_299"].ID != "msg_old_299" {
		t.Fatalf("found %v, %v; want fc_new_1, fc_old_7 and msg_old_299", keysOf(found), err)
	}
	if m, err := c.SMembers(ctx, "tether:i:a:fc_old_250").Result(); err != nil || len(m) != 1 || m[0] != "tether:r:a:old_250" {
		t.Fatalf("index of fc_old_250 = %v, %v; want the walk to have indexed it", m, err)
	}
	if ttl, err := c.PTTL(ctx, "tether:i:a:fc_old_250").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("index of fc_old_250: PTTL %v, %v; want its response's", ttl, err)
	}
	wantComplete(t, c, true)
	if _, err := store.FindItem(ctx, s, "fc_old_1", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another owner found a legacy item: %v", err)
	}

	// An older build stores one more: its stamp makes the index incomplete again.
	putLegacy(t, c, itemResponse("old_late", "a"))
	wantComplete(t, c, false)
	if it, err := store.FindItem(ctx, s, "fc_old_late", "a"); err != nil || it.CallID != "call_old_late" {
		t.Fatalf("late legacy item: %+v, %v", it, err)
	}
	wantComplete(t, c, true)

	// With the index complete, a miss does not walk: a response written behind every build's
	// back (no stamp) is not found, where a walk would have indexed it.
	r := itemResponse("sneaked", "a")
	k := "tether:r:a:sneaked"
	if err := c.HSet(ctx, k, "input", "[]", "output", `[{"type":"function_call","id":"fc_sneaked"}]`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, "tether:lru", redis.Z{Score: 1, Member: k}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.FindItem(ctx, s, "fc_"+r.Response.ID, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a complete index walked on a miss: %v", err)
	}
}

// wantComplete checks whether the item index is marked complete: itemidx equal to the legacy
// count, and the clock last stamped by an indexing build.
func wantComplete(t *testing.T, c *redis.Client, want bool) {
	t.Helper()
	ctx := context.Background()
	v, err := c.MGet(ctx, "tether:itemidx", "tether:legacy", "tether:clock", "tether:iclock").Result()
	if err != nil {
		t.Fatal(err)
	}
	legacy := v[1]
	if legacy == nil {
		legacy = "0"
	}
	if got := v[0] != nil && v[0] == legacy && v[2] == v[3]; got != want {
		t.Fatalf("index complete = %v (itemidx, legacy, clock, iclock = %v), want %v", got, v, want)
	}
}

// TestRedisItemIndexTTL: index entries live as long as their responses: they expire with
// them, a use of a response extends them with it, and an entry left over (a response gone, or
// one that no longer holds the item) finds nothing.
func TestRedisItemIndexTTL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	long, c := openRedis(t, srv, store.RedisOptions{TTL: time.Hour})
	if err := long.Put(ctx, itemResponse("kept", "a")); err != nil {
		t.Fatal(err)
	}
	// Shorten the index entry as if it were older; a use of the response extends it again.
	if err := c.PExpire(ctx, "tether:i:a:fc_kept", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Get(ctx, "kept", "a"); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, "tether:i:a:fc_kept").Result(); err != nil || ttl <= time.Hour-time.Minute {
		t.Fatalf("index entry after a use: PTTL %v, %v; want about an hour", ttl, err)
	}
	// A shared item id keeps the longest life of its holders.
	short, _ := openRedis(t, srv, store.RedisOptions{TTL: 300 * time.Millisecond})
	dup := itemResponse("short", "a")
	dup.Input = append(dup.Input, protocol.Item{Type: protocol.ItemFunctionCall, ID: "fc_kept", CallID: "call_kept", Name: "f", Arguments: "{}"})
	if err := short.Put(ctx, dup); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, "tether:i:a:fc_kept").Result(); err != nil || ttl <= time.Hour-time.Minute {
		t.Fatalf("shared index entry: PTTL %v, %v; want the longer-lived holder's", ttl, err)
	}
	// The short-lived response expires, and its own index entries with it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := c.Exists(ctx, "tether:r:a:short", "tether:i:a:fc_short", "tether:i:a:msg_short").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the short-lived response's keys still there after 10s", n)
		}
	}
	found, err := store.FindItems(ctx, long, []string{"fc_short", "msg_short", "fc_kept"}, "a")
	if err != nil || len(found) != 1 || found["fc_kept"].CallID != "call_kept" {
		t.Fatalf("after expiry: %v, %v; want fc_kept only", keysOf(found), err)
	}
	// Left-over entries: one naming a response that is gone, one naming a response that does
	// not hold the item.
	if err := c.SAdd(ctx, "tether:i:a:fc_ghost", "tether:r:a:short", "tether:r:a:kept").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.FindItem(ctx, long, "fc_ghost", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a stale index entry: %v, want ErrNotFound", err)
	}
}

func keysOf(m map[string]protocol.Item) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
