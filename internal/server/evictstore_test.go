package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/session"
)

// TestEvictedLatestWhileTheStoreFails: a public-shape rollout suspended at a tool call behind a
// store:true segment has parked, and its parked value is in a shared Redis too. Its segment is
// then evicted from the connection's registry (-cache-responses 1) while Redis does not answer
// (CLIENT PAUSE of writes): the eviction cannot claim the value back to end the rollout. The
// failure is logged with the segment's id, counted in tether_store_errors_total, and the rollout
// leaves the connection whole, to the store. Once Redis answers, a continuation of the evicted
// segment on the same connection claims it from there and takes the hot path, and nothing is
// left in Redis. It used to stay parked here, unreachable until its suspend timeout, with its
// copy in Redis that this connection could not claim (the key was in use): the continuation
// went cold, and the copy stayed in Redis.
func TestEvictedLatestWhileTheStoreFails(t *testing.T) {
	start, rc := sharedRedis(t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, aURL := start(Options{Logger: log, StoreTimeout: 3 * time.Second,
		Limits: session.Limits{ParkAfter: 20 * time.Millisecond, CacheResponses: 1}})
	c := dialPublic(t, aURL, "")
	p := startPublic(t, c, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 && a.Metrics().Parked.Load() == 1 })
	if keys := publicKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":public:"+p.id()) {
		t.Fatalf("parked keys %v: want the one of %s", keys, p.id())
	}
	errs := a.store.Errors()

	ctx := context.Background()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	// A store:false answer on the same connection: its segment evicts p's, the latest of the
	// parked rollout, which is settled before that segment's terminal event is sent.
	if f := publicTurn(c, publicCreate("something else", false, "0")); f[len(f)-1].Type() != "response.completed" {
		t.Fatalf("the evicting create: %v", f[len(f)-1])
	}
	if err := rc.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if n := a.store.Errors(); n == errs {
		t.Fatal("the failed claim was not counted in tether_store_errors_total")
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN msg=\"the rollout of an evicted response") || !strings.Contains(l, "response_id="+p.id()) {
		t.Fatalf("no warning naming the evicted response %s; logs:\n%s", p.id(), l)
	}
	if keys := publicKeys(t, rc); len(keys) != 1 {
		t.Fatalf("the rollout's value is not in the store: parked keys %v", keys)
	}
	if code, _ := do(t, "GET", httpURL(aURL, "/v1/responses/"+p.id()), "", ""); code != 200 {
		t.Fatalf("GET of the evicted segment: %d", code)
	}
	// The client continues the evicted segment: claimed from the store, hot.
	hot := a.Counters().Hot.Load()
	next := publicTurn(c, p.next)
	if f := next[len(next)-1]; f.Type() != "response.completed" || f.Str("response", "previous_response_id") != p.id() {
		t.Fatalf("continuation of the evicted segment: %v", f)
	}
	if n := a.Counters().Hot.Load(); n != hot+1 {
		t.Fatalf("the continuation was not hot (hot %d → %d)", hot, n)
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked values left in Redis after the claim: %v", keys)
	}
}
