package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

var shellTool = client.FunctionTool("exec_command", "Run a shell command.", map[string]any{
	"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}},
	"required": []string{"cmd"}})

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, url string, opts *client.Options) *client.Conn {
	t.Helper()
	c, err := client.Dial(ctxT(t), url, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func twoCalls(input string) client.CreateRequest {
	return client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage(input)},
		Tools: []client.Tool{shellTool}, Metadata: map[string]string{"sim.calls": "2"}}
}

// TestAppendRollout drives a 2-call rollout by hand: one Response, numbering without gaps,
// cumulative usage, the hot path on each append.
func TestAppendRollout(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	c := dial(t, base+"/v1", nil)
	if c.Shape() != client.ShapeAppend {
		t.Fatalf("shape %s, want append", c.Shape())
	}
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("count the lines"))
	if err != nil {
		t.Fatal(err)
	}
	seq, suspensions := 0, 0
	for {
		for ev, err := range r.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.SequenceNumber != seq {
				t.Fatalf("%s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
		}
		s := r.Suspension()
		if s == nil {
			break
		}
		suspensions++
		if s.ResponseID != r.ID() || len(s.Calls) != 1 || s.Calls[0].Name != "exec_command" {
			t.Fatalf("suspension %+v of %s", s, r.ID())
		}
		if err := r.Append(ctx, s.Calls[0].Output("ran "+s.Calls[0].Arguments)); err != nil {
			t.Fatal(err)
		}
	}
	resp := r.Response()
	if resp == nil || resp.Status != "completed" || suspensions != 2 || len(resp.Output) != 3 {
		t.Fatalf("final %+v after %d suspensions", resp, suspensions)
	}
	if resp.ID != r.ID() || !strings.Contains(resp.OutputText(), "tether-call-2") {
		t.Errorf("final id %s (rollout %s), text %q", resp.ID, r.ID(), resp.OutputText())
	}
	if u := r.Usage(); u != *resp.Usage || u.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("usage %+v, final %+v: want equal, with cached tokens", u, *resp.Usage)
	}
}

// TestPublicFallback runs the same loop through a proxy that drops the opt-in header: the
// client speaks the public shape, continues with previous_response_id on the hot path, and
// merges the segments into one final Response.
func TestPublicFallback(t *testing.T) {
	srv, base := servertest.Start(t, server.Options{})
	proxy, _ := stripProxy(t, base)
	c := dial(t, proxy+"/v1", nil)
	if c.Shape() != client.ShapePublic {
		t.Fatalf("shape %s, want public", c.Shape())
	}
	ctx := ctxT(t)
	var ids []string
	resp, err := c.Run(ctx, twoCalls("count the lines"), client.RunOptions{
		Tools: map[string]client.ToolFunc{"exec_command": func(_ context.Context, call client.Call) (string, error) {
			return "ran " + call.Arguments, nil
		}},
		OnEvent: func(ev client.Event) {
			if ev.Type == "response.created" {
				ids = append(ids, ev.ResponseID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || len(resp.Output) != 3 || len(ids) != 3 || resp.ID != ids[2] {
		t.Fatalf("final %s %s with %d items; segments %v", resp.ID, resp.Status, len(resp.Output), ids)
	}
	if !strings.Contains(resp.OutputText(), "tether-call-2") {
		t.Errorf("answer %q", resp.OutputText())
	}
	if hot := srv.Counters().Hot.Load(); hot != 2 {
		t.Errorf("hot-path continuations %d, want 2", hot)
	}
	if resp.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("usage %+v: want cached tokens from the hot path", *resp.Usage)
	}
}

var errBoom = errors.New("boom")

// TestDialOptions: PublicShape skips the opt-in; extra OpenAI-Beta tokens keep it; the server
// sees the headers.
func TestDialOptions(t *testing.T) {
	srv, base := servertest.Start(t, server.Options{})
	pub := dial(t, base+"/v1", &client.Options{PublicShape: true})
	if pub.Shape() != client.ShapePublic {
		t.Fatalf("PublicShape: shape %s", pub.Shape())
	}
	if _, err := pub.Run(ctxT(t), twoCalls("public"), client.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if hot := srv.Counters().Hot.Load(); hot != 2 {
		t.Errorf("hot-path continuations %d, want 2", hot)
	}
	h := http.Header{"Openai-Beta": {"responses_websockets=2026-02-06"}}
	app := dial(t, strings.Replace(base, "http://", "ws://", 1)+"/v1/responses", &client.Options{Header: h, DialTimeout: 5 * time.Second})
	if app.Shape() != client.ShapeAppend {
		t.Fatalf("with another OpenAI-Beta token: shape %s, want append", app.Shape())
	}
}

// TestQueryOptIn: through the proxy that drops OpenAI-Beta, QueryOptIn still gets the append
// shape.
func TestQueryOptIn(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	proxy, _ := stripProxy(t, base)
	c := dial(t, proxy+"/v1", &client.Options{QueryOptIn: true})
	if c.Shape() != client.ShapeAppend {
		t.Fatalf("shape %s, want append", c.Shape())
	}
	resp, err := c.Run(ctxT(t), twoCalls("query"), client.RunOptions{})
	if err != nil || resp.Status != "completed" || len(resp.Output) != 3 {
		t.Fatalf("Run: %v, %+v", err, resp)
	}
}
