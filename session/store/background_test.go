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
	if err := k.DeleteBackground(ctx, "o", "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of no record: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if keys, _ := c.Keys(ctx, "*").Result(); len(keys) != 0 {
		t.Fatalf("keys left after delete: %v", keys)
	}
}

// TestRedisSaveBackgrounds: one SaveBackgrounds of 300 saves (three scripts of at most 128, in
// one pipeline) writes each record and its events as SaveBackground would, answers each
// save's cancel request in order, and a save without a record only answers it, writing
// nothing; a batch over the bytes bound is split too; a Redis whose script cache was flushed
// still takes the batch; a save with no ttl refuses the whole batch.
func TestRedisSaveBackgrounds(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	r, err := store.NewRedis(ctx, srv.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	var k store.BackgroundKeeper = store.Guard(r, 5*time.Second, nil)
	const n = 300
	id := func(i int) string { return fmt.Sprintf("resp_%d", i) }
	var saves []store.BackgroundSave
	for i := range n {
		saves = append(saves, store.BackgroundSave{Owner: "o", ID: id(i), Rec: fmt.Appendf(nil, "r%d", i), Events: bgEvents(0, i%4), TTL: time.Minute})
	}
	cancels, err := k.SaveBackgrounds(ctx, saves)
	if err != nil || len(cancels) != n {
		t.Fatalf("first batch: %d answers, %v", len(cancels), err)
	}
	for _, i := range []int{7, 200} {
		if err := k.CancelBackground(ctx, "o", id(i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Half of them only ask; the others write again with an event more, one of them large.
	for i := range saves {
		if i%2 == 0 {
			saves[i] = store.BackgroundSave{Owner: "o", ID: id(i)}
			continue
		}
		saves[i].Rec = fmt.Appendf(nil, "r%d again", i)
		saves[i].Events = bgEvents(0, i%4+1)
	}
	saves[1].Events[0].Data = make([]byte, 2<<20)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cancels, err = k.SaveBackgrounds(ctx, saves)
	if err != nil || len(cancels) != n {
		t.Fatalf("second batch: %d answers, %v", len(cancels), err)
	}
	for i := range n {
		if cancels[i] != (i == 7 || i == 200) {
			t.Fatalf("save %d: cancel %v", i, cancels[i])
		}
		rec, evs, err := k.LoadBackground(ctx, "o", id(i), -1, 100)
		want, events := fmt.Sprintf("r%d", i), i%4
		if i%2 == 1 {
			want, events = fmt.Sprintf("r%d again", i), i%4+1
		}
		if err != nil || string(rec) != want || len(evs) != events {
			t.Fatalf("response %d: %q, %d events, %v; want %q, %d events", i, rec, len(evs), err, want, events)
		}
	}
	if _, err := k.SaveBackgrounds(ctx, []store.BackgroundSave{{Owner: "o", ID: "resp_x", Rec: []byte("x")}}); !errors.Is(err, store.ErrBadTTL) {
		t.Fatalf("a save with no ttl: %v", err)
	}
	if _, _, err := k.LoadBackground(ctx, "o", "resp_x", -1, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused batch wrote: %v", err)
	}
}
