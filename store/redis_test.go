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
	"github.com/tetherd/tether/store"
	"github.com/tetherd/tether/store/storetest"
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
	var resp string
	for _, k := range keys {
		if strings.HasPrefix(k, "tether:r:") {
			resp = k
		}
	}
	// The owner id appears as given: the key_id of the server's access log.
	if len(keys) != 5 || resp != "tether:r:3f2c9a0b1d4e5f60:resp_1" {
		t.Fatalf("keys = %v, want tether:r:<owner>:resp_1, tether:lru, tether:sizes, tether:bytes, tether:clock", keys)
	}
	ttl, err := c.PTTL(ctx, resp).Result()
	if err != nil || ttl <= store.DefaultTTL-store.DefaultTTL/100 || ttl > store.DefaultTTL {
		t.Fatalf("PTTL = %v, %v; want about %v", ttl, err, store.DefaultTTL)
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

// TestRedisFindItem: an item of the owner's stored responses is found by id; another owner's
// is not.
func TestRedisFindItem(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 { // more than one SCAN batch
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
}
