package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
)

// TestReconnectAtAgeLimit: the server's connection-age limit ends the WebSocket while the
// client runs a tool; the client continues the rollout on a new connection, from the stored
// Response (store:true) or by replaying the context (store:false), in both shapes.
func TestReconnectAtAgeLimit(t *testing.T) {
	for _, store := range []bool{true, false} {
		name := map[bool]string{true: "store", false: "replay"}[store]
		t.Run(name, func(t *testing.T) {
			shapes(t, server.Options{MaxConnectionAge: time.Second}, func(t *testing.T, c *client.Conn) {
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
