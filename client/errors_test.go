package client_test

import (
	"errors"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestRejectedAppend: an append with a wrong call_id comes back as *client.Error from Events,
// the rollout stays suspended with the same calls, and a good append then finishes it.
func TestRejectedAppend(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		r, err := c.Start(ctx, parallelCalls("fix it", "1"))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range r.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		s := r.Suspension()
		if s == nil {
			t.Fatal("not suspended")
		}
		if err := r.Append(ctx, client.Call{CallID: "call_nope"}.Output("x")); err != nil {
			t.Fatal(err)
		}
		var got error
		for _, err := range r.Events(ctx) {
			got = err
		}
		e, ok := client.AsError(got)
		if !ok || e.Status != 400 || e.Type != "invalid_request_error" || e.Param != "input" ||
			(e.Code != "tool_call_not_found" && e.Code != "missing_tool_output") {
			t.Fatalf("Events error %#v, want a 400 tool-output error on input", got)
		}
		if again := r.Suspension(); again == nil || again.Calls[0].CallID != s.Calls[0].CallID {
			t.Fatalf("after the rejected append: suspension %+v, want %+v", again, s)
		}
		if err := r.Append(ctx, s.Calls[0].Output("fixed")); err != nil {
			t.Fatal(err)
		}
		for _, err := range r.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if resp := r.Response(); resp == nil || resp.Status != "completed" {
			t.Fatalf("final %+v", resp)
		}
		if err := r.Append(ctx, s.Calls[0].Output("late")); !errors.Is(err, client.ErrEnded) {
			t.Errorf("append after the end: %v, want ErrEnded", err)
		}
	})
}

// TestBadCreate: a create the server rejects ends the rollout with the *client.Error, and the
// connection stays usable.
func TestBadCreate(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		bad := twoCalls("x")
		bad.Extra = map[string]any{"max_output_tokens": -1}
		r, err := c.Start(ctx, bad)
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for _, err := range r.Events(ctx) {
			got = err
		}
		e, ok := client.AsError(got)
		if !ok || e.Code != "invalid_type" || e.Param != "max_output_tokens" {
			t.Fatalf("Events error %#v, want invalid_type on max_output_tokens", got)
		}
		if err := r.Append(ctx); !errors.Is(err, client.ErrEnded) {
			t.Errorf("append to a rejected create: %v, want ErrEnded", err)
		}
		if _, err := c.Run(ctx, twoCalls("still usable"), client.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelSuspended: Cancel ends a suspended rollout with reason "cancelled".
func TestCancelSuspended(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		r, err := c.Start(ctx, twoCalls("stop"))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range r.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		var last client.Event
		for ev, err := range r.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			last = ev
		}
		resp := r.Response()
		if last.Final != resp || resp == nil || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "cancelled" || len(resp.Output) != 1 {
			t.Fatalf("final %+v", resp)
		}
		if err := r.Cancel(ctx); !errors.Is(err, client.ErrEnded) {
			t.Errorf("second cancel: %v, want ErrEnded", err)
		}
	})
}

// TestDialErrors: a refused upgrade is a *client.Error with the HTTP status and the server's
// code; a bad URL is an error before any dial.
func TestDialErrors(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Keys: server.NewKeys("sk-right")})
	_, err := client.Dial(ctxT(t), base+"/v1", &client.Options{APIKey: "sk-wrong"})
	e, ok := client.AsError(err)
	if !ok || e.Status != 401 {
		t.Fatalf("dial with a wrong key: %v, want a 401 *client.Error", err)
	}
	c := dial(t, base+"/v1", &client.Options{APIKey: "sk-right"})
	if _, err := c.Run(ctxT(t), twoCalls("with a key"), client.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(ctxT(t), "ftp://x/v1", nil); err == nil {
		t.Error("dial ftp://: no error")
	}
}

// TestErrorWhileAnotherSamples: rollout A's bad append is rejected while rollout B samples on
// the same connection; the error reaches A only, and both then complete.
func TestErrorWhileAnotherSamples(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		a, err := c.Start(ctx, parallelCalls("rollout a", "1"))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range a.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		slow := client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage("rollout b")},
			Metadata: map[string]string{"sim.speed": "4000", "sim.answer_tokens": "400"}}
		b, err := c.Start(ctx, slow)
		if err != nil {
			t.Fatal(err)
		}
		bEvents := 0
		for ev, err := range b.Events(ctx) {
			if err != nil {
				t.Fatalf("b: %v", err)
			}
			if bEvents++; ev.Type == "response.output_text.delta" && bEvents == 5 {
				// b samples now: a's bad append is answered between b's events.
				if err := a.Append(ctx, client.Call{CallID: "call_nope"}.Output("x")); err != nil {
					t.Fatal(err)
				}
			}
		}
		if resp := b.Response(); resp == nil || resp.Status != "completed" {
			t.Fatalf("b: final %+v", resp)
		}
		var aErr error
		for _, err := range a.Events(ctx) {
			aErr = err
		}
		if _, ok := client.AsError(aErr); !ok || a.Suspension() == nil {
			t.Fatalf("a: Events error %v, suspension %v; want a *client.Error and still suspended", aErr, a.Suspension())
		}
		if _, err := a.Run(ctx, client.RunOptions{}); err != nil {
			t.Fatalf("a: Append after the rejection: %v", err)
		}
	})
}
