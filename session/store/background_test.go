package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/session/store"
)

func bgEvents(from, to int) []store.BackgroundEvent {
	var evs []store.BackgroundEvent
	for i := from; i < to; i++ {
		evs = append(evs, store.BackgroundEvent{Seq: i, Type: "response.output_text.delta", Data: fmt.Appendf(nil, `{"sequence_number":%d}`, i)})
	}
	return evs
}

// TestRedisBackgroundKeeper: a saved record and its events load back from any position; a
// retried save does not repeat events; the first kept bound drops the older ones; a cancel
// request is reported to the next save; another owner finds nothing; delete removes all.
func TestRedisBackgroundKeeper(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	r, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var k store.BackgroundKeeper = store.Guard(r, time.Second, nil)
	if _, ok := store.BackgroundOf(store.Guard(r, time.Second, nil)); !ok {
		t.Fatal("a guarded Redis is no BackgroundKeeper")
	}
	if _, ok := store.BackgroundOf(store.Guard(store.NewMemory(0, 0), time.Second, nil)); ok {
		t.Fatal("a guarded Memory store claims to keep background responses")
	}
	if _, _, err := k.LoadBackground(ctx, "o", "resp_1", -1, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load before any save: %v", err)
	}
	if _, err := k.SaveBackground(ctx, "o", "resp_1", []byte("r1"), bgEvents(0, 5), 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A retry of the same events plus new ones keeps each once.
	cancel, err := k.SaveBackground(ctx, "o", "resp_1", []byte("r2"), bgEvents(3, 8), 0, time.Minute)
	if err != nil || cancel {
		t.Fatalf("save: cancel %v, err %v", cancel, err)
	}
	rec, evs, err := k.LoadBackground(ctx, "o", "resp_1", -1, 100)
	if err != nil || string(rec) != "r2" || len(evs) != 8 {
		t.Fatalf("load: %q, %d events, %v", rec, len(evs), err)
	}
	for i, ev := range evs {
		if ev.Seq != i || string(ev.Data) != fmt.Sprintf(`{"sequence_number":%d}`, i) || ev.Type != "response.output_text.delta" {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if _, evs, _ := k.LoadBackground(ctx, "o", "resp_1", 5, 1); len(evs) != 1 || evs[0].Seq != 6 {
		t.Fatalf("load after 5, at most 1: %+v", evs)
	}
	if _, evs, _ := k.LoadBackground(ctx, "o", "resp_1", 2, 0); evs != nil {
		t.Fatalf("load of no events: %+v", evs)
	}
	// The bound: events before 6 go.
	if _, err := k.SaveBackground(ctx, "o", "resp_1", []byte("r3"), bgEvents(8, 10), 6, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, evs, _ := k.LoadBackground(ctx, "o", "resp_1", -1, 100); len(evs) != 4 || evs[0].Seq != 6 || evs[3].Seq != 9 {
		t.Fatalf("after the bound: %+v", evs)
	}
	if _, _, err := k.LoadBackground(ctx, "other", "resp_1", -1, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another owner's load: %v", err)
	}
	if err := k.CancelBackground(ctx, "o", "resp_1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if cancel, err := k.SaveBackground(ctx, "o", "resp_1", []byte("r4"), nil, 6, time.Minute); err != nil || !cancel {
		t.Fatalf("save after a cancel request: cancel %v, err %v", cancel, err)
	}
	if _, err := k.SaveBackground(ctx, "o", "resp_1", nil, nil, 0, 0); !errors.Is(err, store.ErrBadTTL) {
		t.Fatalf("save with no ttl: %v", err)
	}
	if err := k.DeleteBackground(ctx, "o", "resp_1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.LoadBackground(ctx, "o", "resp_1", -1, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load after delete: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if keys, _ := c.Keys(ctx, "*").Result(); len(keys) != 0 {
		t.Fatalf("keys left after delete: %v", keys)
	}
}
