package compat_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// sharedPair starts a real redis-server and two instances (A and B) of the realtime sim that
// share it as their store, each with its own connection pool and opts.
func sharedPair(t *testing.T, a, b server.Options) (*fixture, *fixture) {
	t.Helper()
	rs := redistest.Start(t)
	start := func(opts server.Options) *fixture {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		opts.Store = st
		opts.StoreTimeout = 5 * time.Second
		return newFixture(t, realtime(opts))
	}
	return start(a), start(b)
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
