package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/session"
)

// TestReconnectAtAgeLimit: the server's connection-age limit ends the WebSocket while the
// client runs a tool; the client continues the rollout on a new connection, from the stored
// Response (store:true) or by replaying the context (store:false), in both shapes.
func TestReconnectAtAgeLimit(t *testing.T) {
	for _, store := range []bool{true, false} {
		name := map[bool]string{true: "store", false: "replay"}[store]
		t.Run(name, func(t *testing.T) {
			shapes(t, server.Options{Limits: session.Limits{MaxConnectionAge: time.Second}}, func(t *testing.T, c *client.Conn) {
				q := twoCalls("outlive the connection")
				q.Metadata = map[string]string{"sim.calls": "1"}
				q.Store = &store
				ctx := ctxT(t)
				var ids []string
				resp, err := c.Run(ctx, q, client.RunOptions{
					Tools: map[string]client.ToolFunc{"exec_command": func(ctx context.Context, call client.Call) (string, error) {
						select { // wait for the server to end the connection at its age limit
						case <-c.LinkDone():
						case <-ctx.Done():
							return "", ctx.Err()
						}
						return "ran after the limit", nil
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
				if resp.Status != "completed" || len(ids) != 2 || resp.ID != ids[1] || len(resp.Output) != 2 {
					t.Fatalf("final %s %s with %d items; Responses %v", resp.ID, resp.Status, len(resp.Output), ids)
				}
				// The continuation names the first Response only when it was stored.
				if want := map[bool]string{true: ids[0], false: ""}[store]; resp.PreviousResponseID != want {
					t.Errorf("continuation's previous_response_id %q, want %q", resp.PreviousResponseID, want)
				}
				text := resp.OutputText()
				if !strings.Contains(text, "outlive the connection") || !strings.Contains(text, "ran after the limit") {
					t.Errorf("the continued context lacks the input or the tool output: %q", text)
				}
			})
		})
	}
}

// TestShutdownWhileSuspended: at server shutdown a suspended rollout stays suspended on the
// client; the Append that would continue it on a new connection gets the server's refusal as a
// *client.Error, and the rollout is still suspended.
func TestShutdownWhileSuspended(t *testing.T) {
	srv, base := servertest.Start(t, server.Options{})
	c := dial(t, base+"/v1", nil)
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("shut down"))
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
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-c.LinkDone()
	err = r.Append(ctx, s.Calls[0].Output("too late"))
	if e, ok := client.AsError(err); !ok || e.Status != 503 || e.Code != "server_shutting_down" {
		t.Fatalf("append after shutdown: %v, want the 503 server_shutting_down refusal", err)
	}
	if r.Suspension() == nil {
		t.Error("the rollout is no longer suspended")
	}
}

// TestClose: after Close, Start fails with ErrClosed, and a suspended rollout's Append too.
func TestClose(t *testing.T) {
	_, base := servertest.Start(t, server.Options{})
	c := dial(t, base+"/v1", nil)
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("close"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := r.Suspension()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, twoCalls("again")); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	var got error
	for _, err := range r.Events(ctx) {
		got = err
	}
	if !errors.Is(got, client.ErrClosed) {
		t.Errorf("Events of a suspended rollout after Close: %v, want ErrClosed", got)
	}
	if err := r.Append(ctx, s.Calls[0].Output("x")); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
}

// TestNoReconnect: with NoReconnect, a rollout suspended at the age limit ends with the
// server's response.incomplete (reason connection_limit), and Append reports ErrEnded.
func TestNoReconnect(t *testing.T) {
	_, base := servertest.Start(t, server.Options{Limits: session.Limits{MaxConnectionAge: 500 * time.Millisecond}})
	c := dial(t, base+"/v1", &client.Options{NoReconnect: true})
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("no reconnect"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := r.Suspension()
	<-c.LinkDone()
	var last client.Event
	for ev, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Final == nil || last.Final.Status != "incomplete" || last.Final.IncompleteDetails.Reason != "connection_limit" {
		t.Fatalf("last event %+v, want the final incomplete with reason connection_limit", last)
	}
	if err := r.Append(ctx, s.Calls[0].Output("x")); !errors.Is(err, client.ErrEnded) {
		t.Errorf("Append: %v, want ErrEnded", err)
	}
	if _, err := c.Start(ctx, twoCalls("again")); !errors.Is(err, client.ErrConnectionLost) {
		t.Errorf("Start on the ended connection: %v, want ErrConnectionLost", err)
	}
}
