package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// keyHeader is the Authorization header of API key k, with the append opt-in when appendShape.
func keyHeader(k string, appendShape bool) http.Header {
	h := http.Header{"Authorization": {"Bearer " + k}}
	if appendShape {
		h.Add("OpenAI-Beta", AppendBeta)
	}
	return h
}

// suspendAtCall sends an append-shape create with one tool call on c and returns the
// response id and the function_call item of its response.done.
func suspendAtCall(t *testing.T, c *wstest.Client, stored bool, text string) (string, wstest.Frame) {
	t.Helper()
	m := create(text, map[string]string{"sim.calls": "1"}, shell)
	m["store"] = stored
	c.Send(m)
	fs := c.Until("response.done")
	done := fs[len(fs)-1]
	out, _ := done.Get("output").([]any)
	if len(out) != 1 {
		t.Fatalf("response.done without one function_call: %v", done)
	}
	return done.Str("response_id"), wstest.Frame(out[0].(map[string]any))
}

// refInput is an input that references the function_call fc and answers it.
func refInput(fc wstest.Frame) []any {
	return []any{map[string]any{"type": "item_reference", "id": fc.Str("id")},
		map[string]any{"type": "function_call_output", "call_id": fc.Str("call_id"), "output": "ran"}}
}

// postRef POSTs a create of input with key and returns the status and the body.
func postRef(t *testing.T, url, key string, input []any) (int, wstest.Frame) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim", "input": input, "tools": []any{shell}})
	code, body := do(t, "POST", httpURL(url, "/v1/responses"), key, string(b))
	return code, wstest.Frame(body)
}

// publicRef sends a public-shape create of input on c and returns its last frame.
func publicRef(t *testing.T, c *wstest.Client, input []any) wstest.Frame {
	t.Helper()
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": input, "tools": []any{shell}})
	fs := c.Until("response.completed", "response.incomplete", "response.failed", "error")
	return fs[len(fs)-1]
}

// TestItemReferenceToLiveAppendRollout: the function_call an append-shape rollout suspended at
// is found by an item_reference before the rollout ends — on its own connection, on another
// connection of the same key (public shape) and by POST /v1/responses — with the in-process
// store and with Redis; another key's reference is not found, nor one to a store:false
// rollout from another connection, and the error says why. Once the rollouts end or their
// connection closes, nothing is left in the server's index of live items.
func TestItemReferenceToLiveAppendRollout(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b")})
		testItemReferenceToLiveAppendRollout(t, s, url, false)
	})
	t.Run("parked", func(t *testing.T) {
		s, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b"), Limits: session.Limits{ParkAfter: time.Millisecond}})
		testItemReferenceToLiveAppendRollout(t, s, url, true)
	})
	t.Run("redis", func(t *testing.T) {
		_, _, s, url := redisServer(t, Options{Keys: NewKeys("key-a", "key-b")})
		testItemReferenceToLiveAppendRollout(t, s, url, false)
	})
}

// testItemReferenceToLiveAppendRollout runs TestItemReferenceToLiveAppendRollout on s; parks:
// s parks suspended rollouts, and the references are sent once the rollout has parked.
func testItemReferenceToLiveAppendRollout(t *testing.T, s *Server, url string, parks bool) {
	ca := wstest.Dial(t, url, keyHeader("key-a", true))
	rid, fc := suspendAtCall(t, ca, true, "Remember plum")
	if parks {
		waitFor(t, func() bool { return s.Metrics().Parked.Load() == 1 })
	}

	// Its own connection: a new rollout forking from the suspended call.
	ca.Send(map[string]any{"type": "response.create", "model": "sim", "input": refInput(fc), "tools": []any{shell}})
	fs := ca.Until("response.completed", "response.failed", "error")
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("reference on the rollout's own connection: %v", l)
	}
	// Another connection of the key, public shape.
	cp := wstest.Dial(t, url, keyHeader("key-a", false))
	if l := publicRef(t, cp, refInput(fc)); l.Type() != "response.completed" {
		t.Fatalf("reference on another connection: %v", l)
	}
	// POST /v1/responses of the key.
	if code, body := postRef(t, url, "key-a", refInput(fc)); code != 200 || body.Str("status") != "completed" {
		t.Fatalf("reference by POST: %d %v", code, body)
	}
	// Another key finds nothing, and is told where items are found.
	code, body := postRef(t, url, "key-b", refInput(fc))
	if code != 400 || body.Str("error", "code") != "invalid_item_reference" || body.Str("error", "param") != "input[0]" ||
		!strings.Contains(body.Str("error", "message"), "store:false") {
		t.Fatalf("another key's reference: %d %v", code, body)
	}
	// A store:false rollout's call: found on its own connection only.
	_, private := suspendAtCall(t, ca, false, "Remember fig")
	if code, body := postRef(t, url, "key-a", refInput(private)); code != 400 || body.Str("error", "code") != "invalid_item_reference" {
		t.Fatalf("reference to a store:false rollout's call from another connection: %d %v", code, body)
	}
	ca.Send(map[string]any{"type": "response.create", "model": "sim", "input": refInput(private), "tools": []any{shell}, "store": false})
	fs = ca.Until("response.completed", "response.failed", "error")
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("reference to a store:false rollout's call on its connection: %v", l)
	}

	// The rollout ends: its items are the store's, still found; the index lets them go.
	ca.Send(map[string]any{"type": "response.append", "response_id": rid, "input": refInput(fc)[1:]})
	fs = ca.Until("response.completed", "response.failed")
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("the rollout's end: %v", l)
	}
	waitFor(t, func() bool { return s.live.Len() == 0 }) // the store:false rollout is not indexed
	if code, body := postRef(t, url, "key-a", refInput(fc)); code != 200 || body.Str("status") != "completed" {
		t.Fatalf("reference by POST once the rollout ended: %d %v", code, body)
	}
	// A store:true rollout still suspended when its connection closes leaves nothing behind.
	_, _ = suspendAtCall(t, ca, true, "Remember pear")
	if s.live.Len() == 0 {
		t.Fatal("a suspended store:true rollout's items are not indexed")
	}
	_ = ca.C.CloseNow()
	waitFor(t, func() bool { return s.live.Len() == 0 })
}

// TestItemReferenceToLiveRolloutOfAnotherInstance: two instances share Redis; an item of an
// append-shape rollout live on one is not found on the other (the error says so) until the
// rollout ends and is stored, and then it is.
func TestItemReferenceToLiveRolloutOfAnotherInstance(t *testing.T) {
	rs := redistest.Start(t)
	urls := make([]string, 2)
	for i := range urls {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		_, urls[i] = testServer(t, Options{Store: st, StoreTimeout: 2 * time.Second})
	}
	c := dialAppend(t, urls[0])
	rid, fc := suspendAtCall(t, c, true, "Remember plum")
	code, body := postRef(t, urls[1], "", refInput(fc))
	if code != 400 || body.Str("error", "code") != "invalid_item_reference" || !strings.Contains(body.Str("error", "message"), "another server instance") {
		t.Fatalf("a live rollout's item on another instance: %d %v", code, body)
	}
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": refInput(fc)[1:]})
	fs := c.Until("response.completed", "response.failed")
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("the rollout's end: %v", l)
	}
	if code, body := postRef(t, urls[1], "", refInput(fc)); code != 200 || body.Str("status") != "completed" {
		t.Fatalf("the ended rollout's item on another instance: %d %v", code, body)
	}
}
