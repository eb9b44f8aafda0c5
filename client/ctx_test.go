package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
)

// TestEndedContextChangesNothing: Start, Append and Cancel called with a ctx that has already
// ended return its error and send nothing, however often: the Conn stays usable, a suspended
// rollout on it stays suspended and then finishes, and a new rollout gets its own events.
func TestEndedContextChangesNothing(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		r, err := c.Start(ctx, twoCalls("keep me"))
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
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		for i := range 50 {
			if _, err := c.Start(ended, twoCalls("never sent")); !errors.Is(err, context.Canceled) {
				t.Fatalf("try %d: Start with an ended ctx: %v, want context.Canceled", i, err)
			}
			if err := r.Append(ended, s.Calls[0].Output("never sent")); !errors.Is(err, context.Canceled) {
				t.Fatalf("try %d: Append with an ended ctx: %v, want context.Canceled", i, err)
			}
			if c.Shape() == client.ShapeAppend {
				if err := r.Cancel(ended); !errors.Is(err, context.Canceled) {
					t.Fatalf("try %d: Cancel with an ended ctx: %v, want context.Canceled", i, err)
				}
			}
			if r.Suspension() == nil {
				t.Fatalf("try %d: the rollout is no longer suspended", i)
			}
		}
		other, err := c.Start(ctx, twoCalls("a new rollout"))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range other.Events(ctx) {
			if err != nil {
				t.Fatalf("the new rollout: %v", err)
			}
		}
		if other.Suspension() == nil {
			t.Fatal("the new rollout did not reach its first call")
		}
		resp, err := r.Run(ctx, client.RunOptions{Tools: map[string]client.ToolFunc{
			"exec_command": func(context.Context, client.Call) (string, error) { return "ran", nil }}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != "completed" {
			t.Fatalf("final %+v", resp)
		}
	})
}
