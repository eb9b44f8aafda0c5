package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
	"github.com/tetherd/tether/session/store/storetest"
)

func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	n := 0
	storetest.Run(t, func(t *testing.T, maxCount int, maxBytes int64) store.Store {
		n++
		s, err := store.NewRedis(context.Background(), srv.URL(), store.RedisOptions{
			MaxResponses: maxCount, MaxBytes: maxBytes, Prefix: "t" + string(rune('a'+n)) + ":"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestRedisDownAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	_, err := store.NewRedis(context.Background(), srv.URL(), store.RedisOptions{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at "+srv.Addr()) {
		t.Fatalf("err = %v, want a clear 'cannot reach Redis' error", err)
	}
}

func TestRedisKeyLayout(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &store.Response{Owner: "3f2c9a0b1d4e5f60", Input: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_1", Role: "user",
		Content: []protocol.ContentPart{{Type: "input_text", Text: "hi"}}}}}
	r.Response = protocol.Response{ID: "resp_1", Status: protocol.ResponseCompleted}
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var resp, item string
	for _, k := range keys {
		if strings.HasPrefix(k, "tether:r:") {
			resp = k
		}
		if strings.HasPrefix(k, "tether:i:") {
			item = k
		}
	}
	// The owner id appears as given: the key_id of the server's access log.
	if len(keys) != 7 || resp != "tether:r:3f2c9a0b1d4e5f60:resp_1" || item != "tether:i:3f2c9a0b1d4e5f60:msg_1" {
		t.Fatalf("keys = %v, want tether:r:<owner>:resp_1, tether:i:<owner>:msg_1, tether:lru, tether:sizes, tether:bytes, tether:clock, tether:iclock", keys)
	}
	for _, k := range []string{resp, item} {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= store.DefaultTTL-store.DefaultTTL/100 || ttl > store.DefaultTTL {
			t.Fatalf("PTTL %s = %v, %v; want about %v", k, ttl, err, store.DefaultTTL)
		}
	}
	if m, err := c.SMembers(ctx, item).Result(); err != nil || len(m) != 1 || m[0] != resp {
		t.Fatalf("%s holds %v, %v; want the response key", item, m, err)
	}
	if v, err := c.HGet(ctx, resp, "items").Result(); err != nil || v != `["msg_1"]` {
		t.Fatalf("items field = %q, %v", v, err)
	}
}

func TestRedisLostAndBack(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &store.Response{}
	r.Response = protocol.Response{ID: "resp_1", Status: protocol.ResponseCompleted}
	srv.Stop()
	if err := s.Put(ctx, r); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Put with Redis down: err = %v, want a store failure", err)
	}
	if _, err := s.Get(ctx, "resp_1", ""); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get with Redis down: err = %v, want a store failure", err)
	}
	srv.Restart()
	if err := s.Put(ctx, r); err != nil {
		t.Fatalf("Put after Redis came back: %v", err)
	}
	if _, err := s.Get(ctx, "resp_1", ""); err != nil {
		t.Fatal(err)
	}
}

// A Redis that stops answering is bounded by the caller's ctx (-store-timeout), not by
// go-redis's own read timeout.
func TestRedisHonoursContextDeadline(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &store.Response{}
	r.Response = protocol.Response{ID: "resp_1", Status: protocol.ResponseCompleted}
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "2000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Get(short, "resp_1", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get while Redis is paused: err = %v, want the ctx deadline", err)
	}
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "resp_1", ""); err != nil {
		t.Fatalf("Get after Redis answers again: %v", err)
	}
}

// TestRedisFindItem: items of the owner's stored responses are found by id, one or several in one
// call; another owner's are not.
func TestRedisFindItem(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 { // more than one batch of the first miss's walk
		r := &store.Response{Owner: "a", Input: []protocol.Item{{Type: protocol.ItemMessage, ID: fmt.Sprintf("msg_%d", i), Role: "user",
			Content: []protocol.ContentPart{{Type: "input_text", Text: "hi"}}}}}
		r.Response = protocol.Response{ID: fmt.Sprintf("resp_%d", i), Status: protocol.ResponseCompleted,
			Output: []protocol.Item{{Type: protocol.ItemFunctionCall, ID: fmt.Sprintf("fc_%d", i), CallID: "call_1", Name: "f", Arguments: "{}"}}}
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if it, err := store.FindItem(ctx, s, "fc_299", "a"); err != nil || it.CallID != "call_1" {
		t.Fatalf("output item: %+v %v", it, err)
	}
	if _, err := store.FindItem(ctx, s, "msg_7", "a"); err != nil {
		t.Fatalf("input item: %v", err)
	}
	if _, err := store.FindItem(ctx, s, "fc_1", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another owner's item: %v", err)
	}
	if _, err := store.FindItem(ctx, s, "fc_nope", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown item: %v", err)
	}
	// Several ids in one call: the found ones only.
	found, err := store.FindItems(ctx, s, []string{"fc_0", "msg_150", "fc_299", "fc_0", "fc_nope"}, "a")
	if err != nil || len(found) != 3 || found["fc_299"].ID != "fc_299" || found["msg_150"].ID != "msg_150" {
		t.Fatalf("several ids: %+v %v", found, err)
	}
}

// usedMemory is Redis's used_memory (INFO memory).
func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}

// bigResponse is a stored response of owner with about size bytes of input.
func bigResponse(id, parent, owner string, size int) *store.Response {
	r := &store.Response{Owner: owner, Quota: owner, Input: []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_" + id, Role: "user",
		Content: []protocol.ContentPart{{Type: "input_text", Text: id + strings.Repeat("x", size)}}}}}
	r.Response = protocol.Response{ID: id, Status: protocol.ResponseCompleted}
	if parent != "" {
		r.Response.PreviousResponseID = &parent
	}
	return r
}

// TestRedisFullEvicts: when Redis reaches its maxmemory (noeviction) long before the store's
// own bounds, every Put still succeeds: the store evicts its least recently used responses
// until Redis accepts the new one, Redis stays within about one response of its maxmemory,
// and the accounting matches what is stored.
func TestRedisFullEvicts(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetKeyQuota(0, 512<<20) // a quota that is never reached: its bookkeeping is kept too
	const size = 200 << 10
	limit := usedMemory(t, admin) + 4<<20
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory", fmt.Sprint(limit)).Err(); err != nil {
		t.Fatal(err)
	}
	var peak int64
	for i := range 100 { // 20 MB of responses into 4 MB
		if err := s.Put(ctx, bigResponse(fmt.Sprint("resp_", i), "", "k", size)); err != nil {
			t.Fatalf("Put %d with Redis full: %v", i, err)
		}
		peak = max(peak, usedMemory(t, admin))
	}
	t.Logf("maxmemory %d, peak used_memory %d, %d evicted for maxmemory", limit, peak, s.FullEvictions())
	if s.FullEvictions() == 0 {
		t.Fatal("no response was evicted for maxmemory")
	}
	if _, err := s.Get(ctx, "resp_99", "k"); err != nil {
		t.Fatalf("the newest response: %v", err)
	}
	if _, err := s.Get(ctx, "resp_0", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the oldest response: %v, want evicted", err)
	}
	// Each response is held about twice in Redis (its JSON and the allocator's slack).
	if peak > limit+4*size {
		t.Fatalf("Redis used %d bytes at its peak, maxmemory %d", peak, limit)
	}
	keys, err := admin.Keys(ctx, "tether:r:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := admin.ZCard(ctx, "tether:lru").Result()
	qn, _ := admin.ZCard(ctx, "tether:q:k").Result()
	sizes, _ := admin.HVals(ctx, "tether:sizes").Result()
	var sum int64
	for _, v := range sizes {
		var x int64
		fmt.Sscan(v, &x)
		sum += x
	}
	total, _ := admin.Get(ctx, "tether:bytes").Int64()
	qbytes, _ := admin.HGet(ctx, "tether:qbytes", "k").Int64()
	if int64(len(keys)) != n || qn != n || len(sizes) != int(n) || total != sum || qbytes != sum || n == 0 {
		t.Fatalf("accounting: %d response keys, lru %d, key set %d, sizes %d summing %d, bytes %d, key bytes %d",
			len(keys), n, qn, len(sizes), sum, total, qbytes)
	}
}

// TestRedisFullReads: with Redis over its maxmemory, reads, chains and deletes still work;
// a Put fails with a clear error only when nothing is left to evict.
func TestRedisFullReads(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range []*store.Response{bigResponse("a", "", "k", 10), bigResponse("b", "a", "k", 10), bigResponse("c", "", "k", 10)} {
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET with maxmemory 1: %v, want OOM", err)
	}
	if _, err := s.Get(ctx, "b", "k"); err != nil {
		t.Fatalf("Get with Redis full: %v", err)
	}
	if _, err := s.InputItems(ctx, "b", "k", store.Page{}); err != nil {
		t.Fatalf("InputItems with Redis full: %v", err)
	}
	if items, err := s.Chain(ctx, "b", "k"); err != nil || len(items) != 2 {
		t.Fatalf("Chain with Redis full: %d items, %v", len(items), err)
	}
	if err := s.Delete(ctx, "a", "k"); err != nil {
		t.Fatalf("Delete with Redis full: %v", err)
	}
	_, err = s.Chain(ctx, "b", "k")
	if got := store.MissingID(err, "b"); !errors.Is(err, store.ErrNotFound) || got != "a" {
		t.Fatalf("Chain after its parent's Delete: %v names %q, want a", err, got)
	}
	err = s.Put(ctx, bigResponse("d", "", "k", 10))
	if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "maxmemory") {
		t.Fatalf("Put into a Redis that cannot hold one response: %v, want a store failure naming maxmemory", err)
	}
	if n, _ := admin.ZCard(ctx, "tether:lru").Result(); n != 0 {
		t.Fatalf("%d responses left after evicting for one that does not fit", n)
	}
}
