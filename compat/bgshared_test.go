package compat_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/compat"
	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// sharedPair starts a real redis-server and two instances (A and B) of the realtime sim (or of
// opts.Model when set) that share it as their store, each with its own connection pool and
// opts (a StoreTimeout of 5 s unless set).
func sharedPair(t *testing.T, a, b server.Options) (*fixture, *fixture) {
	t.Helper()
	fa, fb, _ := sharedPairOn(t, a, b)
	return fa, fb
}

// sharedPairOn is sharedPair, and also returns the redis-server.
func sharedPairOn(t *testing.T, a, b server.Options) (*fixture, *fixture, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	start := func(opts server.Options) *fixture {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		opts.Store = st
		if opts.StoreTimeout == 0 {
			opts.StoreTimeout = 5 * time.Second
		}
		if opts.Model == nil {
			opts = realtime(opts)
		}
		return newFixture(t, opts)
	}
	return start(a), start(b), rs
}

// sameEvents checks that got and want are the same events, byte for byte in their decoding.
func sameEvents(t *testing.T, got, want []wstest.Frame) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := mustJSON(t, got[i]), mustJSON(t, want[i]); string(g) != string(w) {
			t.Fatalf("event %d differs:\n got %s\nwant %s", i, g, w)
		}
	}
}

// TestBackgroundSharedPollAndStream: on a shared store, a background response created on A
// is seen from B at once (GET: queued or in_progress, same id), B's stream of it while it
// runs on A delivers the same events as A's own stream, in order, to the terminal event; once
// it has ended B answers GET with the completed Response and replays the events after any
// sequence_number from the stored log, and a starting_after past the end is 400.
func TestBackgroundSharedPollAndStream(t *testing.T) {
	a, b := sharedPair(t, server.Options{}, server.Options{})
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a long answer", map[string]any{"metadata": slow("60")})), 200)
	id := created.Str("id")
	polled := jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/"+id, nil), 200)
	if st := polled.Str("status"); polled.Str("id") != id || (st != "queued" && st != "in_progress") || polled.Get("background") != true {
		t.Fatalf("GET on B while it runs on A: %v", polled)
	}
	onA := openSSE(t, do(t, ctx, "GET", a.base+"/responses/"+id+"?stream=true", nil))
	onB := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true", nil))
	if ev := onB.next(); ev.Type() != "response.created" || seq(t, ev) != 0 {
		t.Fatalf("B's stream starts %v", ev)
	}
	// B's first event came while A still samples: the rest follows through the store.
	if n := b.srv.Background().Running(); n != 0 {
		t.Fatalf("B runs %d background responses", n)
	}
	eventsA := onA.rest()
	eventsB := onB.rest()
	sameEvents(t, eventsB, eventsA[1:])
	checkSeq(t, eventsB, 1)
	if end := final(eventsB); end.Type() != "response.completed" {
		t.Fatalf("B's stream ends %s", end.Type())
	}

	got := jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/"+id, nil), 200)
	if got.Str("status") != "completed" || string(mustJSON(t, got.Get("output"))) != string(mustJSON(t, final(eventsA).Get("response", "output"))) {
		t.Fatalf("GET on B after the end: %v", got)
	}
	n := len(eventsA)
	after := n / 2
	replay := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true&starting_after="+strconv.Itoa(after), nil)).rest()
	sameEvents(t, replay, eventsA[after+1:])
	all := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true", nil)).rest()
	sameEvents(t, all, eventsA)
	for _, past := range []string{strconv.Itoa(n + 3), strconv.FormatInt(math.MaxInt64, 10)} {
		e := jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true&starting_after="+past, nil), 400)
		if e.Str("error", "code") != "invalid_value" || e.Str("error", "param") != "starting_after" {
			t.Fatalf("starting_after %s, past the end, on B: %v", past, e)
		}
	}
	jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/resp_unknown?stream=true", nil), 404)
	jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/resp_unknown", nil), 404)
}

// TestBackgroundSharedCancel: a cancel sent to B of a response running on A is left in the
// store; A acts on it at its next write, its stream ends response.incomplete with status
// cancelled, and B answers the cancelled Response; GET says cancelled on both, and a second
// cancel on B answers it again.
func TestBackgroundSharedCancel(t *testing.T) {
	a, b := sharedPair(t, server.Options{}, server.Options{})
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200)
	id := created.Str("id")
	onA := openSSE(t, do(t, ctx, "GET", a.base+"/responses/"+id+"?stream=true", nil))
	if ev := onA.next(); ev.Type() != "response.created" {
		t.Fatalf("first event %s", ev.Type())
	}
	began := time.Now()
	cancelled := jsonAnswer(t, do(t, ctx, "POST", b.base+"/responses/"+id+"/cancel", nil), 200)
	t.Logf("a cancel through the store took %v", time.Since(began))
	if cancelled.Str("status") != "cancelled" || cancelled.Str("id") != id {
		t.Fatalf("cancel on B answered %v", cancelled)
	}
	if end := final(onA.rest()); end.Type() != "response.incomplete" || end.Str("response", "status") != "cancelled" {
		t.Fatalf("A's stream ends %s status %s", end.Type(), end.Str("response", "status"))
	}
	for _, f := range []*fixture{a, b} {
		if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); got.Str("status") != "cancelled" {
			t.Fatalf("GET after the cancel: status %q", got.Str("status"))
		}
	}
	if again := jsonAnswer(t, do(t, ctx, "POST", b.base+"/responses/"+id+"/cancel", nil), 200); again.Str("status") != "cancelled" {
		t.Fatalf("second cancel on B: %v", again)
	}
	if n := a.srv.Background().Running(); n != 0 {
		t.Fatalf("A still runs %d background responses", n)
	}
}

// TestBackgroundSharedDrain: a drain of A ends a background response that outlasts the
// shutdown grace response.incomplete (server_shutdown), and that is what B answers and
// replays afterwards, never in_progress; B's follower, reading through the store, sees the
// same end. A response that ends within the grace finishes normally, and B answers it
// completed.
func TestBackgroundSharedDrain(t *testing.T) {
	t.Run("past the grace", func(t *testing.T) {
		a, b := sharedPair(t, server.Options{Limits: session.Limits{ShutdownGrace: time.Millisecond}}, server.Options{})
		ctx := t.Context()
		id := jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200).Str("id")
		onB := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true", nil))
		if ev := onB.next(); ev.Type() != "response.created" {
			t.Fatalf("first event %s", ev.Type())
		}
		if err := a.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		end := final(onB.rest())
		if end.Type() != "response.incomplete" || end.Str("response", "incomplete_details", "reason") != "server_shutdown" {
			t.Fatalf("B's stream ends %s %v", end.Type(), end.Get("response", "incomplete_details"))
		}
		got := jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/"+id, nil), 200)
		if got.Str("status") != "incomplete" || got.Str("incomplete_details", "reason") != "server_shutdown" {
			t.Fatalf("GET on B after A's drain: %v", got)
		}
		replay := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true", nil)).rest()
		if last := final(replay); last.Type() != "response.incomplete" {
			t.Fatalf("B's replay ends %s", last.Type())
		}
	})
	t.Run("within the grace", func(t *testing.T) {
		a, b := sharedPair(t, server.Options{Limits: session.Limits{ShutdownGrace: time.Minute}}, server.Options{})
		ctx := t.Context()
		id := jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a short answer", map[string]any{"metadata": slow("40")})), 200).Str("id")
		if err := a.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		got := jsonAnswer(t, do(t, ctx, "GET", b.base+"/responses/"+id, nil), 200)
		if got.Str("status") != "completed" {
			t.Fatalf("GET on B after A's drain: %v", got)
		}
		fs := openSSE(t, do(t, ctx, "GET", b.base+"/responses/"+id+"?stream=true", nil)).rest()
		checkSeq(t, fs, 0)
		if last := final(fs); last.Type() != "response.completed" {
			t.Fatalf("B's replay ends %s", last.Type())
		}
	})
}

// scriptCalls returns how many scripts Redis has run since its statistics were reset
// (EVALSHA and EVAL calls, from INFO commandstats).
func scriptCalls(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		c, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q", line)
		}
		n += c
	}
	return n
}

// withStatus returns the first of ids whose Response f answers GET with status, waiting for
// one (the records of a shared store change with each write).
func withStatus(t *testing.T, f *fixture, ids []string, status string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, id := range ids {
			if jsonAnswer(t, do(t, t.Context(), "GET", f.base+"/responses/"+id, nil), 200).Str("status") == status {
				return id
			}
		}
	}
	t.Fatalf("no response of %d has status %s", len(ids), status)
	return ""
}

// TestBackgroundSharedWritesAllInOneCall: an instance running 40 background responses on a
// shared Redis (2 sampling, 38 queued behind -max-sampling) writes them all in one script call
// per write interval (Background.Sync, 250 ms), not one per response: while the sampling
// ones' events reach Redis through three writes, Redis runs one script per interval elapsed
// (and at most two more), where it ran 40 per interval before. What the writes are for holds:
// each record is in Redis, another instance reads the sampling ones' events, and a cancel
// left there by another instance for a queued one is acted on.
func TestBackgroundSharedWritesAllInOneCall(t *testing.T) {
	rs := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	start := func(opts server.Options) *fixture {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		opts.Store, opts.StoreTimeout = st, 5*time.Second
		return newFixture(t, realtime(opts))
	}
	a, b := start(server.Options{MaxSampling: 2}), start(server.Options{})
	ctx := t.Context()
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		ids[i] = jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200).Str("id")
	}
	t.Cleanup(func() {
		for _, id := range ids {
			jsonAnswer(t, do(t, context.Background(), "POST", a.base+"/responses/"+id+"/cancel", nil), 200)
		}
	})
	if keys := rc.Keys(ctx, "tether:b:*").Val(); len(keys) != n {
		t.Fatalf("%d records in Redis, want %d", len(keys), n)
	}
	// One that samples, as B reads it from Redis (in_progress once A has written its
	// response.created), and one that waits.
	sampling, queued := withStatus(t, b, ids, "in_progress"), withStatus(t, b, ids, "queued")
	events := "tether:be::" + sampling
	if err := rc.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// Three writes of the sampling response's events: three intervals at least.
	for last, writes := rc.XLen(ctx, events).Val(), 0; writes < 3; time.Sleep(10 * time.Millisecond) {
		if l := rc.XLen(ctx, events).Val(); l != last {
			last, writes = l, writes+1
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("the sampling response's events reached Redis %d times in 30 s", writes)
		}
	}
	calls, elapsed := scriptCalls(t, rc), time.Since(began)
	intervals := int(elapsed / compat.DefaultBackgroundSync)
	t.Logf("%d script calls in %v (%d intervals) for %d running background responses", calls, elapsed, intervals, n)
	// A ticker fires at most once per interval, and one tick may have waited from before.
	if calls < 3 || calls > intervals+2 {
		t.Fatalf("%d script calls in %v: want between 3 and %d, one per interval", calls, elapsed, intervals+2)
	}
	// A cancel left in Redis by B for a queued response is acted on.
	if got := jsonAnswer(t, do(t, ctx, "POST", b.base+"/responses/"+queued+"/cancel", nil), 200); got.Str("status") != "cancelled" {
		t.Fatalf("cancel on B of a response queued on A: %v", got)
	}
}
