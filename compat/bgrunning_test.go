package compat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// gone checks that nothing of the deleted response id is answered at base any more: GET, its
// event stream, a cancel and a second DELETE are each 404 response_not_found.
func gone(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	for _, q := range []struct{ method, path string }{
		{"GET", "/responses/" + id},
		{"GET", "/responses/" + id + "?stream=true"},
		{"GET", "/responses/" + id + "?stream=true&starting_after=2"},
		{"POST", "/responses/" + id + "/cancel"},
		{"DELETE", "/responses/" + id},
	} {
		e := jsonAnswer(t, do(t, ctx, q.method, base+q.path, nil), 404)
		if e.Str("error", "code") != "response_not_found" {
			t.Fatalf("%s %s after the DELETE: %v", q.method, q.path, e)
		}
	}
}

// continuationWaits checks that a continuation of background response id, which still runs,
// is 409 response_in_progress at base, in the foreground and in the background, rather than
// previous_response_not_found.
func continuationWaits(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	for _, extra := range []map[string]any{nil, {"background": true}} {
		body := map[string]any{"model": "sim", "input": "next", "previous_response_id": id}
		for k, v := range extra {
			body[k] = v
		}
		e := jsonAnswer(t, do(t, ctx, "POST", base+"/responses", body), 409)
		if e.Str("error", "code") != "response_in_progress" || e.Str("error", "param") != "previous_response_id" {
			t.Fatalf("a continuation (%v) while it runs: %v", extra, e)
		}
	}
}

// TestBackgroundDelete: a DELETE of a background response that still runs is 409
// response_in_progress and leaves it running, and so is a continuation naming it; once it has ended (here cancelled) the DELETE
// removes it, and neither GET, its kept events, a cancel nor a second DELETE answers it any
// more. A failed one, which only the instance keeps (it is not stored), is deleted the same
// way.
func TestBackgroundDelete(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		f := newFixture(t, realtime(server.Options{}))
		ctx := t.Context()
		id := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("a secret answer", map[string]any{"metadata": slow("100000")})), 200).Str("id")
		follow := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil))
		if ev := follow.next(); ev.Type() != "response.created" {
			t.Fatalf("first event %s", ev.Type())
		}
		e := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 409)
		if e.Str("error", "code") != "response_in_progress" || !strings.Contains(e.Str("error", "message"), id) {
			t.Fatalf("DELETE while it runs: %v", e)
		}
		if st := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200).Str("status"); st != "in_progress" && st != "queued" {
			t.Fatalf("GET after the refused DELETE: status %q", st)
		}
		continuationWaits(t, ctx, f.base, id)
		jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/"+id+"/cancel", nil), 200)
		follow.rest()
		del := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 200)
		if del.Get("deleted") != true || del.Str("id") != id {
			t.Fatalf("DELETE after the end: %v", del)
		}
		gone(t, ctx, f.base, id)
	})
	t.Run("failed", func(t *testing.T) {
		f := windowFixture(t, 2000)
		ctx := t.Context()
		id := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate(strings.Repeat("lorem ipsum dolor sit amet ", 500), nil)), 200).Str("id")
		select {
		case <-f.srv.Background().Done(id, ""):
		case <-ctx.Done():
			t.Fatal("the background response did not end")
		}
		if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); !windowFailed(got, "2000") {
			t.Fatalf("GET of the failed response: %v", got)
		}
		if del := jsonAnswer(t, do(t, ctx, "DELETE", f.base+"/responses/"+id, nil), 200); del.Get("deleted") != true {
			t.Fatalf("DELETE of the failed response: %v", del)
		}
		gone(t, ctx, f.base, id)
	})
}

// TestBackgroundSharedDelete: on a shared store, B refuses to DELETE a background response
// that runs on A, or to continue it (409 response_in_progress); once it has completed, B's DELETE removes it for
// both instances: A, which ran it and keeps its events, answers 404 like B.
func TestBackgroundSharedDelete(t *testing.T) {
	a, b := sharedPair(t, server.Options{}, server.Options{})
	ctx := t.Context()
	id := jsonAnswer(t, do(t, ctx, "POST", a.base+"/responses", bgCreate("a secret answer", map[string]any{"metadata": slow("40")})), 200).Str("id")
	onA := openSSE(t, do(t, ctx, "GET", a.base+"/responses/"+id+"?stream=true", nil))
	if ev := onA.next(); ev.Type() != "response.created" {
		t.Fatalf("first event %s", ev.Type())
	}
	if e := jsonAnswer(t, do(t, ctx, "DELETE", b.base+"/responses/"+id, nil), 409); e.Str("error", "code") != "response_in_progress" {
		t.Fatalf("DELETE on B while it runs on A: %v", e)
	}
	continuationWaits(t, ctx, b.base, id)
	if end := final(onA.rest()); end.Type() != "response.completed" {
		t.Fatalf("A's stream ends %s", end.Type())
	}
	select {
	case <-a.srv.Background().Done(id, ""):
	case <-ctx.Done():
		t.Fatal("the background response did not end on A")
	}
	if del := jsonAnswer(t, do(t, ctx, "DELETE", b.base+"/responses/"+id, nil), 200); del.Get("deleted") != true {
		t.Fatalf("DELETE on B: %v", del)
	}
	gone(t, ctx, a.base, id)
	gone(t, ctx, b.base, id)
}
