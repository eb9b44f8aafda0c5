package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// sharedRedis starts a real redis-server and returns a factory of servers sharing it as
// their store (-store redis://…), each with its own connection pool, and a client of it.
func sharedRedis(t *testing.T) (func(Options) (*Server, string), *redis.Client) {
	t.Helper()
	rs := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	return func(opts Options) (*Server, string) {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		opts.Store = st
		if opts.StoreTimeout == 0 {
			opts.StoreTimeout = 5 * time.Second
		}
		if opts.SuspendTimeout == 0 {
			opts.SuspendTimeout = time.Minute
		}
		return testServer(t, opts)
	}, rc
}

// dialAs opens an append-shape WebSocket with the API key key ("" for none), opting into
// reattachment when reattach is set.
func dialAs(t *testing.T, url, key string, reattach bool) *wstest.Client {
	t.Helper()
	h := http.Header{}
	h.Add("OpenAI-Beta", AppendBeta)
	if reattach {
		h.Add("OpenAI-Beta", ReattachBeta)
	}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return dialAsHeader(t, url, h)
}

func dialAsHeader(t *testing.T, url string, h http.Header) *wstest.Client {
	t.Helper()
	return wstest.Dial(t, url, h)
}

// suspendCalls creates a rollout of two sequential tool calls (store as given) on c and returns
// its id, pending call_id and the response.done frame.
func suspendCalls(t *testing.T, c *wstest.Client, stored bool) (id, call string, done wstest.Frame) {
	t.Helper()
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "run the checks", "store": stored,
		"tools": []any{shell}, "metadata": map[string]string{"sim.calls": "2"}})
	fs := c.Until("response.done")
	done = fs[len(fs)-1]
	return done.Str("response_id"), done.Get("pending_call_ids").([]any)[0].(string), done
}

func appendTo(c *wstest.Client, id, call string) {
	c.Send(map[string]any{"type": "response.append", "response_id": id,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": call, "output": "ok"}}})
}

// drain shuts s down and returns once it has.
func drain(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDrainParksToStoreAndAnotherInstanceResumesHot: two instances share one Redis. A drain
// of A parks a reattaching client's suspended store:true rollout to Redis: its last event is
// response.parked (next sequence_number), then close 1001. An append naming it on a new
// connection to B claims it and continues it hot: same Response id, sequence_number going on,
// the usage (cached_tokens) of a rollout that stayed live, nothing left in Redis. A client
// that did not opt in, and a store:false rollout, end as before (response.incomplete).
func TestDrainParksToStoreAndAnotherInstanceResumesHot(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{})
	b, bURL := start(Options{})
	_, liveURL := testServer(t, Options{Limits: session.Limits{SuspendTimeout: time.Minute}}) // the control: stays live

	ca := dialAs(t, aURL, "", true)
	if got := ca.Resp.Header.Values("OpenAI-Beta"); !strings.Contains(strings.Join(got, ","), ReattachBeta) {
		t.Fatalf("101 OpenAI-Beta %v: want %s", got, ReattachBeta)
	}
	id, call, done := suspendCalls(t, ca, true)
	_, _, unstored := suspendCalls(t, ca, false)
	old := dialAs(t, aURL, "", false)
	oldID, _, _ := suspendCalls(t, old, true)
	cl := dialAs(t, liveURL, "", false)
	lid, lcall, _ := suspendCalls(t, cl, true)

	go func() { _ = a.Shutdown(context.Background()) }()
	seq := done.Num("sequence_number")
	var parked wstest.Frame
	for range 2 { // the parked rollout's event and the store:false one's ending, in either order
		f := ca.Next()
		switch f.Type() {
		case "response.parked":
			parked = f
		case "response.incomplete":
			if f.Str("response", "id") != unstored.Str("response_id") || f.Str("response", "incomplete_details", "reason") != "server_shutdown" {
				t.Fatalf("store:false rollout: %v", f)
			}
		default:
			t.Fatalf("unexpected frame on drain: %v", f)
		}
	}
	if parked == nil || parked.Str("response_id") != id || parked.Num("sequence_number") != seq+1 {
		t.Fatalf("response.parked %v: want response_id %s, sequence_number %d", parked, id, seq+1)
	}
	ca.ExpectClose(websocket.StatusGoingAway)
	if f := old.Next(); f.Type() != "response.incomplete" || f.Str("response", "id") != oldID {
		t.Fatalf("a client without reattachment: %v", f)
	}
	old.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)
	if n := a.Metrics().StoreParks.Load(); n != 1 {
		t.Fatalf("A parked %d rollouts to the store, want 1", n)
	}

	cb := dialAs(t, bURL, "", true)
	appendTo(cb, id, call)
	appendTo(cl, lid, lcall)
	fs, lfs := cb.Until("response.done"), cl.Until("response.done")
	for i, f := range fs {
		if f.Num("sequence_number") != seq+2+i {
			t.Fatalf("frame %d (%s) on B: sequence_number %d, want %d", i, f.Type(), f.Num("sequence_number"), seq+2+i)
		}
	}
	got, want := fs[len(fs)-1], lfs[len(lfs)-1]
	if got.Str("response_id") != id {
		t.Fatalf("response.done of %s, want %s", got.Str("response_id"), id)
	}
	if u, lu := string(mustMarshal(t, got.Get("usage"))), string(mustMarshal(t, want.Get("usage"))); u != lu {
		t.Fatalf("usage resumed on B %s, live %s", u, lu)
	}
	if cached, _ := got.Int("usage", "input_tokens_details", "cached_tokens"); cached == 0 {
		t.Fatalf("not hot: %v", got.Get("usage"))
	}
	if n := b.Metrics().Claims.Load(); n != 1 {
		t.Fatalf("B claimed %d, want 1", n)
	}
	if keys, _ := rc.Keys(context.Background(), "tether:p:*").Result(); len(keys) != 0 {
		t.Fatalf("parked values left in Redis after the claim: %v", keys)
	}
	appendTo(cb, id, got.Get("pending_call_ids").([]any)[0].(string))
	end := cb.Until("response.completed")
	if r := end[len(end)-1]; r.Str("response", "id") != id || len(r.Get("response", "output").([]any)) != 3 {
		t.Fatalf("completed %v", r)
	}
}

// TestParkedRolloutClaimedOnce: two instances racing to resume one parked rollout: exactly one
// continues it, the other answers response_not_found; a foreign key finds nothing, its owner
// does.
func TestParkedRolloutClaimedOnce(t *testing.T) {
	start, _ := sharedRedis(t)
	keys := NewKeys("key-a", "key-b")
	a, aURL := start(Options{Keys: keys})
	_, bURL := start(Options{Keys: keys})
	_, cURL := start(Options{Keys: keys})
	ca := dialAs(t, aURL, "key-a", true)
	id, call, _ := suspendCalls(t, ca, true)
	go func() { _ = a.Shutdown(context.Background()) }()
	if f := ca.Next(); f.Type() != "response.parked" {
		t.Fatalf("want response.parked, got %v", f)
	}
	ca.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)

	foreign := dialAs(t, bURL, "key-b", false)
	appendTo(foreign, id, call)
	foreign.ExpectError(http.StatusNotFound, "response_not_found", "response_id")

	racers := []*wstest.Client{dialAs(t, bURL, "key-a", false), dialAs(t, cURL, "key-a", false)}
	var wg sync.WaitGroup
	firsts := make([]wstest.Frame, len(racers))
	for i, c := range racers {
		wg.Go(func() {
			appendTo(c, id, call)
			firsts[i] = c.Next()
		})
	}
	wg.Wait()
	won, lost := 0, 0
	for _, f := range firsts {
		switch {
		case f.Type() == "error" && f.Str("error", "code") == "response_not_found":
			lost++
		case f.Type() != "error":
			won++
		default:
			t.Fatalf("unexpected answer %v", f)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("%d instances resumed the rollout and %d were refused: want 1 and 1 (%v)", won, lost, firsts)
	}
}

// TestParkUnstored: with ParkUnstored a drain parks a store:false rollout too.
func TestParkUnstored(t *testing.T) {
	start, _ := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkUnstored: true}})
	_, bURL := start(Options{})
	ca := dialAs(t, aURL, "", true)
	id, call, _ := suspendCalls(t, ca, false)
	go func() { _ = a.Shutdown(context.Background()) }()
	if f := ca.Next(); f.Type() != "response.parked" || f.Str("response_id") != id {
		t.Fatalf("want response.parked, got %v", f)
	}
	ca.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)
	cb := dialAs(t, bURL, "", false)
	appendTo(cb, id, call)
	if fs := cb.Until("response.done"); fs[len(fs)-1].Str("response_id") != id {
		t.Fatalf("frames %v", fs)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parkedKeys returns the Redis keys of parked rollouts.
func parkedKeys(t *testing.T, rc *redis.Client) []string {
	t.Helper()
	keys, err := rc.Keys(context.Background(), "tether:p:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestParkedAfterIdleSurvivesItsInstance: with a shared store, a reattaching client's rollout
// parked after -park-after is written to the store when it parks (not at shutdown): the
// instance's connection then drops without a drain (the state a SIGKILL leaves: the value in
// Redis, no response.parked), and an append on another instance resumes it hot, with the same
// Response id and sequence_number going on, leaving nothing in Redis.
func TestParkedAfterIdleSurvivesItsInstance(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	b, bURL := start(Options{})
	_, liveURL := testServer(t, Options{Limits: session.Limits{SuspendTimeout: time.Minute}}) // the control: stays live

	ca := dialAs(t, aURL, "", true)
	id, call, done := suspendCalls(t, ca, true)
	seq := done.Num("sequence_number")
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 })
	if keys := parkedKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+id) {
		t.Fatalf("parked keys in Redis %v: want the one of %s", keys, id)
	}
	if ttl := rc.PTTL(context.Background(), parkedKeys(t, rc)[0]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the parked value's ttl is %v: want the rest of the suspend timeout", ttl)
	}
	ca.C.CloseNow() // the instance is gone for its client: no close frame, no drain
	waitFor(t, func() bool { return a.Metrics().AppendConns.Load() == 0 && a.Metrics().Parked.Load() == 0 })
	if keys := parkedKeys(t, rc); len(keys) != 1 {
		t.Fatalf("the parked value did not outlive its connection: %v", keys)
	}

	cl := dialAs(t, liveURL, "", false)
	lid, lcall, _ := suspendCalls(t, cl, true)
	cb := dialAs(t, bURL, "", true)
	appendTo(cb, id, call)
	appendTo(cl, lid, lcall)
	fs, lfs := cb.Until("response.done"), cl.Until("response.done")
	for i, f := range fs {
		if f.Num("sequence_number") != seq+1+i {
			t.Fatalf("frame %d (%s) on B: sequence_number %d, want %d", i, f.Type(), f.Num("sequence_number"), seq+1+i)
		}
	}
	got, want := fs[len(fs)-1], lfs[len(lfs)-1]
	if got.Str("response_id") != id {
		t.Fatalf("response.done of %s, want %s", got.Str("response_id"), id)
	}
	if u, lu := string(mustMarshal(t, got.Get("usage"))), string(mustMarshal(t, want.Get("usage"))); u != lu {
		t.Fatalf("usage resumed on B %s, live %s", u, lu)
	}
	if cached, _ := got.Int("usage", "input_tokens_details", "cached_tokens"); cached == 0 {
		t.Fatalf("not hot: %v", got.Get("usage"))
	}
	if n := b.Metrics().Claims.Load(); n != 1 {
		t.Fatalf("B claimed %d, want 1", n)
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked values left in Redis after the claim: %v", keys)
	}
}

// TestParkedAfterIdleClaimedOnce: a rollout parked after -park-after and written to the store
// is resumed by one instance only. Resumed on its own connection it takes its local copy and
// deletes the stored one (nothing left in Redis); claimed by another instance first, the
// local copy is forgotten and an append on the first connection finds nothing. A client that
// did not opt into reattachment, and a store:false Response, park in memory only.
func TestParkedAfterIdleClaimedOnce(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	_, bURL := start(Options{})

	ca := dialAs(t, aURL, "", true)
	id, call, done := suspendCalls(t, ca, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 })
	appendTo(ca, id, call) // on its own connection: the local copy, hot
	fs := ca.Until("response.done")
	if f := fs[0]; f.Num("sequence_number") != done.Num("sequence_number")+1 {
		t.Fatalf("resumed on its connection: first frame %v", f)
	}
	if cached, _ := fs[len(fs)-1].Int("usage", "input_tokens_details", "cached_tokens"); cached == 0 {
		t.Fatalf("not hot: %v", fs[len(fs)-1].Get("usage"))
	}
	if a.Metrics().Claims.Load() != 1 || a.Metrics().Unparks.Load() != 1 {
		t.Fatalf("A took back %d stored values and unparked %d rollouts: want 1 and 1", a.Metrics().Claims.Load(), a.Metrics().Unparks.Load())
	}
	// It suspended again, so it parks (and is written) again: now another instance claims it.
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 2 })
	if keys := parkedKeys(t, rc); len(keys) != 1 {
		t.Fatalf("parked keys %v, want one", keys)
	}
	cb := dialAs(t, bURL, "", true)
	appendTo(cb, id, fs[len(fs)-1].Get("pending_call_ids").([]any)[0].(string))
	if end := cb.Until("response.completed"); end[len(end)-1].Str("response", "id") != id {
		t.Fatalf("B: %v", end[len(end)-1])
	}
	appendTo(ca, id, call)
	ca.ExpectError(http.StatusNotFound, "response_not_found", "response_id")
	if n := a.Metrics().Parked.Load(); n != 0 {
		t.Fatalf("A still holds %d parked rollouts after B claimed its only one", n)
	}

	old := dialAs(t, aURL, "", false)
	suspendCalls(t, old, true)
	suspendCalls(t, ca, false)
	waitFor(t, func() bool { return a.Metrics().Parked.Load() == 2 })
	if n := a.Metrics().StoreCopies.Load(); n != 2 {
		t.Fatalf("%d parked values written to the store, want still 2 (no reattachment, store:false)", n)
	}
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("parked keys %v, want none", keys)
	}
}

// TestDrainOfARolloutAlreadyInTheStore: a drain of a rollout that -park-after has written to
// the store already rewrites it there (response.parked takes the next sequence_number, the
// resume on another instance the one after); one that another instance has claimed meanwhile
// gets no response.parked.
func TestDrainOfARolloutAlreadyInTheStore(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	_, bURL := start(Options{})
	ca := dialAs(t, aURL, "", true)
	id, call, done := suspendCalls(t, ca, true)
	gone, gcall, _ := suspendCalls(t, ca, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 2 })
	cb := dialAs(t, bURL, "", true)
	appendTo(cb, gone, gcall) // claimed by B before A drains
	cb.Until("response.done")

	go func() { _ = a.Shutdown(context.Background()) }()
	seq := done.Num("sequence_number")
	if f := ca.Next(); f.Type() != "response.parked" || f.Str("response_id") != id || f.Num("sequence_number") != seq+1 {
		t.Fatalf("want response.parked of %s at %d, got %v", id, seq+1, f)
	}
	ca.ExpectClose(websocket.StatusGoingAway)
	drain(t, a)
	if n := a.Metrics().StoreParks.Load(); n != 1 {
		t.Fatalf("A parked %d rollouts to the store on drain, want 1", n)
	}
	if keys := parkedKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+id) {
		t.Fatalf("parked keys %v: want %s's only", keys, id)
	}
	appendTo(cb, id, call)
	if fs := cb.Until("response.done"); fs[0].Num("sequence_number") != seq+2 || fs[len(fs)-1].Str("response_id") != id {
		t.Fatalf("resumed on B: %v … %v", fs[0], fs[len(fs)-1])
	}
}
