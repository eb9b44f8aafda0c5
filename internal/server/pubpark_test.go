package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// This file tests public-shape rollouts parked to a shared store: a response.create with the
// previous_response_id of a segment whose rollout another instance parked continues it hot.

// dialPublic opens a public-shape WebSocket with the API key key ("" for none).
func dialPublic(t *testing.T, url, key string) *wstest.Client {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return wstest.Dial(t, url, h)
}

// publicChain is a public-shape rollout of two sequential tool calls: its first segment
// (suspended at the first call) and the create that continues it.
type publicChain struct {
	first []wstest.Frame
	next  map[string]any
}

// startPublic creates, on c, a rollout of two sequential tool calls (store as given) and
// returns it suspended at the first call.
func startPublic(t *testing.T, c *wstest.Client, stored bool) publicChain {
	t.Helper()
	first := publicTurn(c, publicCreate("run the checks", stored, "2"))
	if f := first[len(first)-1]; f.Type() != "response.completed" || len(answerCalls(first)) != 1 {
		t.Fatalf("first segment: %v", f)
	}
	return publicChain{first: first, next: publicCreate(answerCalls(first), stored, "2", first[0].Str("response", "id"))}
}

func (p publicChain) id() string { return p.first[0].Str("response", "id") }

// checkHot checks that got, the segment continuing p on another instance, is the Response a
// rollout that stayed live gives (want, on the control): a new id whose previous_response_id
// is p's, sequence_number from 0, the same output and usage, cached_tokens > 0.
func checkHot(t *testing.T, p publicChain, got, want []wstest.Frame) {
	t.Helper()
	g, w := got[len(got)-1], want[len(want)-1]
	if g.Type() != "response.completed" {
		t.Fatalf("continuation: %v", g)
	}
	if id := g.Str("response", "id"); id == p.id() || !strings.HasPrefix(id, "resp_") || g.Str("response", "previous_response_id") != p.id() {
		t.Fatalf("continuation id %s, previous_response_id %s: want a new Response after %s", id, g.Str("response", "previous_response_id"), p.id())
	}
	for i, f := range got {
		if f.Num("sequence_number") != i {
			t.Fatalf("frame %d (%s): sequence_number %d", i, f.Type(), f.Num("sequence_number"))
		}
	}
	if u, lu := string(mustMarshal(t, g.Get("response", "usage"))), string(mustMarshal(t, w.Get("response", "usage"))); u != lu {
		t.Fatalf("usage of the continuation on another instance %s, live %s", u, lu)
	}
	if cached, _ := g.Int("response", "usage", "input_tokens_details", "cached_tokens"); cached == 0 {
		t.Fatalf("not hot: %v", g.Get("response", "usage"))
	}
	if a, b := len(g.Get("response", "output").([]any)), len(w.Get("response", "output").([]any)); a != b || len(answerCalls(got)) != 1 {
		t.Fatalf("continuation output: %d items (%d calls), live %d", a, len(answerCalls(got)), b)
	}
}

// finishPublic answers the last call of seg on c and checks that the rollout completes.
func finishPublic(t *testing.T, c *wstest.Client, seg []wstest.Frame) {
	t.Helper()
	end := publicTurn(c, publicCreate(answerCalls(seg), true, "2", seg[0].Str("response", "id")))
	if f := end[len(end)-1]; f.Type() != "response.completed" || len(answerCalls(end)) != 0 {
		t.Fatalf("end of the rollout: %v", f)
	}
}

// publicKeys returns the Redis keys of rollouts the public shape parked.
func publicKeys(t *testing.T, rc *redis.Client) []string {
	t.Helper()
	var keys []string
	for _, k := range parkedKeys(t, rc) {
		if strings.Contains(k, ":public:") {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestPublicDrainParksToStoreAndAnotherInstanceResumesHot: two instances share one Redis. A
// drain of A parks a public-shape rollout suspended behind a store:true segment to Redis (the
// client sees nothing but the close 1001: its segment has ended); a store:false one ends as
// before. A response.create on B with that segment's previous_response_id claims it and
// continues it hot: a new Response numbered from 0, the output and usage (cached_tokens) of a
// rollout that stayed live, counted hot; nothing is left in Redis, and the rollout goes on to
// its end on B.
func TestPublicDrainParksToStoreAndAnotherInstanceResumesHot(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{})
	b, bURL := start(Options{})
	_, liveURL := testServer(t, Options{Limits: session.Limits{SuspendTimeout: time.Minute}}) // the control: stays live

	ca := dialPublic(t, aURL, "")
	p := startPublic(t, ca, true)
	startPublic(t, ca, false)
	cl := dialPublic(t, liveURL, "")
	lp := startPublic(t, cl, true)

	go func() { _ = a.Shutdown(context.Background()) }()
	ca.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)
	if n := a.Metrics().StoreParks.Load(); n != 1 {
		t.Fatalf("A parked %d rollouts to the store, want 1 (store:true only)", n)
	}
	if keys := publicKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":public:"+p.id()) {
		t.Fatalf("parked keys %v: want the one of %s", keys, p.id())
	}

	cb := dialPublic(t, bURL, "")
	got, want := publicTurn(cb, p.next), publicTurn(cl, lp.next)
	checkHot(t, p, got, want)
	if n := b.Counters().Hot.Load(); n != 1 {
		t.Fatalf("B counted %d hot continuations, want 1", n)
	}
	if n := b.Metrics().Claims.Load(); n != 1 {
		t.Fatalf("B claimed %d, want 1", n)
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked values left in Redis after the claim: %v", keys)
	}
	finishPublic(t, cb, got)
	if n := b.Counters().Hot.Load(); n != 2 {
		t.Fatalf("B counted %d hot continuations, want 2", n)
	}
}

// TestPublicParkedAfterIdleSurvivesItsInstance: with a shared store, a public-shape rollout
// parked after -park-after is written to the store when it parks; its client then drops its
// socket without a close (the connection ends, the value stays in Redis), and a create on
// another instance continues it hot.
func TestPublicParkedAfterIdleSurvivesItsInstance(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	b, bURL := start(Options{})
	_, liveURL := testServer(t, Options{Limits: session.Limits{SuspendTimeout: time.Minute}})

	ca := dialPublic(t, aURL, "")
	p := startPublic(t, ca, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 })
	keys := publicKeys(t, rc)
	if len(keys) != 1 || !strings.HasSuffix(keys[0], ":public:"+p.id()) {
		t.Fatalf("parked keys in Redis %v: want the one of %s", keys, p.id())
	}
	if ttl := rc.PTTL(context.Background(), keys[0]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the parked value's ttl is %v: want the rest of the suspend timeout", ttl)
	}
	ca.C.CloseNow()
	waitFor(t, func() bool { return a.Metrics().PublicConns.Load() == 0 && a.Metrics().Parked.Load() == 0 })
	if keys := publicKeys(t, rc); len(keys) != 1 {
		t.Fatalf("the parked value did not outlive its connection: %v", keys)
	}

	cl := dialPublic(t, liveURL, "")
	lp := startPublic(t, cl, true)
	cb := dialPublic(t, bURL, "")
	got := publicTurn(cb, p.next)
	checkHot(t, p, got, publicTurn(cl, lp.next))
	if b.Counters().Hot.Load() != 1 || b.Metrics().Claims.Load() != 1 {
		t.Fatalf("B: %d hot, %d claims; want 1 and 1", b.Counters().Hot.Load(), b.Metrics().Claims.Load())
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked values left in Redis after the claim: %v", keys)
	}
	finishPublic(t, cb, got)
}

// TestPublicParkedClaimedOnce: a foreign key's create does not claim a parked public-shape
// rollout (it gets previous_response_not_found, as today, and the value stays); of two
// instances racing to continue it, one claims it (hot) and the other rebuilds it cold from
// the stored chain (not_on_connection); both answer a complete Response.
func TestPublicParkedClaimedOnce(t *testing.T) {
	start, rc := sharedRedis(t)
	keys := NewKeys("key-a", "key-b")
	a, aURL := start(Options{Keys: keys, Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	b, bURL := start(Options{Keys: keys})
	c, cURL := start(Options{Keys: keys})

	ca := dialPublic(t, aURL, "key-a")
	p := startPublic(t, ca, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 })

	foreign := dialPublic(t, bURL, "key-b")
	foreign.Send(p.next)
	foreign.ExpectError(http.StatusBadRequest, "previous_response_not_found", "previous_response_id")
	if n := len(publicKeys(t, rc)); n != 1 || b.Metrics().Claims.Load() != 0 {
		t.Fatalf("after a foreign key's create: %d parked values, %d claims; want 1 and 0", n, b.Metrics().Claims.Load())
	}

	racers := []*wstest.Client{dialPublic(t, bURL, "key-a"), dialPublic(t, cURL, "key-a")}
	answers := make([][]wstest.Frame, len(racers))
	var wg sync.WaitGroup
	for i, cl := range racers {
		wg.Go(func() { answers[i] = publicTurn(cl, p.next) })
	}
	wg.Wait()
	for i, fs := range answers {
		if f := fs[len(fs)-1]; f.Type() != "response.completed" || f.Str("response", "previous_response_id") != p.id() {
			t.Fatalf("racer %d: %v", i, f)
		}
	}
	hot := b.Counters().Hot.Load() + c.Counters().Hot.Load()
	cold := b.Counters().ColdBy(protocol.ColdNotOnConnection) + c.Counters().ColdBy(protocol.ColdNotOnConnection)
	claims := b.Metrics().Claims.Load() + c.Metrics().Claims.Load()
	if hot != 1 || cold != 1 || claims != 1 {
		t.Fatalf("%d hot, %d cold (not_on_connection), %d claims: want 1 each", hot, cold, claims)
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked values left in Redis: %v", keys)
	}
}

// TestPublicParkUnstored: with ParkUnstored a drain parks a store:false public-shape rollout
// too, and a create on another instance continues it hot (no stored chain to fall back on).
func TestPublicParkUnstored(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkUnstored: true}})
	b, bURL := start(Options{})
	ca := dialPublic(t, aURL, "")
	p := startPublic(t, ca, false)
	go func() { _ = a.Shutdown(context.Background()) }()
	ca.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)
	if keys := publicKeys(t, rc); len(keys) != 1 {
		t.Fatalf("parked keys %v: want the store:false rollout's", keys)
	}
	cb := dialPublic(t, bURL, "")
	fs := publicTurn(cb, p.next)
	if f := fs[len(fs)-1]; f.Type() != "response.completed" || f.Str("response", "previous_response_id") != p.id() || b.Counters().Hot.Load() != 1 {
		t.Fatalf("continuation on B (%d hot): %v", b.Counters().Hot.Load(), f)
	}
}
