package compat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
)

// windowSim is a sim whose context window (2,000 tokens) refuses failedInput.
func windowSim() *sim.Sim { return sim.NewSim(sim.SimOptions{ContextWindow: 2000}) }

// failedInput is over the context window of windowSim: its response ends failed.
var failedInput = strings.Repeat("lorem ipsum dolor sit amet ", 500)

// endedOn creates a background response with input on f and waits for its end there.
func endedOn(t *testing.T, f *fixture, input string) string {
	t.Helper()
	ctx := t.Context()
	id := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate(input, nil)), 200).Str("id")
	select {
	case <-f.srv.Background().Done(id, ""):
	case <-ctx.Done():
		t.Fatal("the background response did not end")
	}
	return id
}

// alreadyEnded checks that a cancel of id, which has ended, is 400 response_already_completed
// at base.
func alreadyEnded(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	e := jsonAnswer(t, do(t, ctx, "POST", base+"/responses/"+id+"/cancel", nil), 400)
	if e.Str("error", "code") != "response_already_completed" {
		t.Fatalf("cancel of %s, which has ended, at %s: %v", id, base, e)
	}
}

// TestBackgroundDeleteWhileTheStoreFails: a DELETE that the store fails (Redis pauses its
// writes: CLIENT PAUSE WRITE) is 503 store_unavailable and changes nothing. The two
// background responses it named on A, which ran them — one completed (stored), one failed
// (kept only by its record and by A) — are still kept by A once Redis writes again, and
// answered as before on A and on B: GET, the same events from sequence_number 0, the cancel
// of an ended response. A DELETE then succeeds, and neither instance answers them any more.
func TestBackgroundDeleteWhileTheStoreFails(t *testing.T) {
	a, b, rs := sharedPairOn(t, server.Options{Model: windowSim(), StoreTimeout: 2 * time.Second},
		server.Options{StoreTimeout: 2 * time.Second})
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := t.Context()
	status := map[string]string{endedOn(t, a, "a short answer"): "completed", endedOn(t, a, failedInput): "failed"}
	events := map[string][]wstest.Frame{}
	for id := range status {
		events[id] = openSSE(t, do(t, ctx, "GET", a.base+"/responses/"+id+"?stream=true", nil)).rest()
	}

	if err := rc.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	unpause := func() {
		if err := rc.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(unpause)
	for id := range status {
		if e := jsonAnswer(t, do(t, ctx, "DELETE", a.base+"/responses/"+id, nil), 503); e.Str("error", "code") != "store_unavailable" {
			t.Fatalf("DELETE of %s while Redis does not write: %v", id, e)
		}
	}
	unpause()

	for id, st := range status {
		if a.srv.Background().Done(id, "") == nil {
			t.Fatalf("A forgot the %s response %s at the failed DELETE", st, id)
		}
		for _, f := range []*fixture{a, b} {
			if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); got.Str("status") != st {
				t.Fatalf("GET of the %s response after the failed DELETE: %v", st, got)
			}
			sameEvents(t, openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil)).rest(), events[id])
		}
		alreadyEnded(t, ctx, a.base, id)
	}
	for id := range status {
		if del := jsonAnswer(t, do(t, ctx, "DELETE", a.base+"/responses/"+id, nil), 200); del.Get("deleted") != true {
			t.Fatalf("DELETE once Redis writes again: %v", del)
		}
		gone(t, ctx, a.base, id)
		gone(t, ctx, b.base, id)
	}
}

// TestBackgroundSharedDeleteFailed: on a shared store, a background response that ended
// failed on A is not stored: its record and A's copy keep it. B answers it as A does — GET,
// its events, and a cancel 400 response_already_completed — and a DELETE on B deletes it
// where B's GET sees it: afterwards neither instance answers it (404), A's copy included.
func TestBackgroundSharedDeleteFailed(t *testing.T) {
	a, b := sharedPair(t, server.Options{Model: windowSim()}, server.Options{})
	ctx := t.Context()
	id := endedOn(t, a, failedInput)
	events := openSSE(t, do(t, ctx, "GET", a.base+"/responses/"+id+"?stream=true", nil)).rest()
	for _, f := range []*fixture{a, b} {
		if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); !windowFailed(got, "2000") {
			t.Fatalf("GET of the failed response: %v", got)
		}
		sameEvents(t, openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil)).rest(), events)
		alreadyEnded(t, ctx, f.base, id)
	}
	if del := jsonAnswer(t, do(t, ctx, "DELETE", b.base+"/responses/"+id, nil), 200); del.Get("deleted") != true || del.Str("id") != id {
		t.Fatalf("DELETE on B of the failed response that ran on A: %v", del)
	}
	gone(t, ctx, a.base, id)
	gone(t, ctx, b.base, id)
}
