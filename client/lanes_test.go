package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
)

// TestLanes: rollouts on two named lanes and the default lane of one Conn sample at the same
// time, and each gets its own events: the output events, which carry no response id, are
// routed by their lane. Each rollout runs two tool calls to its answer; its text deltas make
// its answer, which quotes its own input and tool outputs only. A third named lane, over the
// server's limit of two, ends its own rollout with websocket_stream_limit_reached.
func TestLanes(t *testing.T) {
	shapes(t, server.Options{Limits: session.Limits{MaxLanes: 2}}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		lanes := []string{"a", "b", ""}
		var wg sync.WaitGroup
		for _, lane := range lanes {
			req := twoCalls("input of lane <" + lane + ">")
			req.StreamID = lane
			req.Metadata["sim.answer_tokens"] = "300"
			r, err := c.Start(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				var text strings.Builder
				resp, err := r.Run(ctx, client.RunOptions{
					Tools: map[string]client.ToolFunc{"exec_command": func(context.Context, client.Call) (string, error) {
						return "tool of lane <" + lane + ">", nil
					}},
					OnEvent: func(ev client.Event) {
						if ev.Type == "response.output_text.delta" {
							text.WriteString(ev.Delta)
						}
					},
				})
				if err != nil {
					t.Errorf("lane %q: %v", lane, err)
					return
				}
				got := resp.OutputText()
				if resp.Status != "completed" || text.String() != got {
					t.Errorf("lane %q: status %s; deltas %q, answer %q", lane, resp.Status, text.String(), got)
				}
				if strings.Count(got, "<"+lane+">") != 3 || strings.Count(got, "<") != 3 {
					t.Errorf("lane %q: the answer quotes another lane's items: %q", lane, got)
				}
			})
		}
		over, err := c.Start(ctx, client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage("one lane too many")}, StreamID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for _, err := range over.Events(ctx) {
			got = err
		}
		if e, ok := client.AsError(got); !ok || e.Code != "websocket_stream_limit_reached" {
			t.Errorf("the third lane: %v, want websocket_stream_limit_reached", got)
		}
		wg.Wait()
	})
}
