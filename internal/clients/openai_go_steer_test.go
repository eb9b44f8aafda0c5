package clients_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
)

// TestGoWebSocketSteer: openai-go v3.99.0 steers a streaming response with its typed
// response.steer event: every frame decodes through the SDK's union, the steered response ends
// response.incomplete (reason steered), and the successor the server starts — previous_response_id
// the steered one — completes with the steer's input in its context. Each response's events
// go through the SDK's accumulator.
func TestGoWebSocketSteer(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn,
		server: server.Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})}})
	ctx := testContext(t)
	conn := connect(t, ctx, f)
	err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Input: textInput("Tell a long story about rivers."),
		Metadata: shared.Metadata{"sim.speed": "1000", "sim.answer_tokens": "1500"},
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var steered, successor string
	var sent, accepted bool
	var acc responses.ResponseAccumulator
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		switch ev.Type {
		case "error", "response.steer.failed":
			t.Fatalf("%s: %s", ev.Type, ev.RawJSON())
		case "response.steer.accepted":
			a := ev.AsResponseSteerAcceptedEvent()
			if a.Steer.PreviousResponseID != steered || !strings.HasPrefix(a.Steer.ID, "steer_") {
				t.Fatalf("steer.accepted %s for %s", ev.RawJSON(), steered)
			}
			accepted = true
			continue
		case "response.created":
			acc = responses.ResponseAccumulator{}
			if steered == "" {
				steered = ev.AsResponseCreated().Response.ID
			} else {
				successor = ev.AsResponseCreated().Response.ID
			}
		}
		if err := acc.AddEvent(ev); err != nil {
			t.Fatalf("the SDK's accumulator rejected %s: %v (%s)", ev.Type, err, ev.RawJSON())
		}
		switch ev.Type {
		case "response.output_text.delta":
			if successor == "" && !sent {
				steer := responses.ResponsesClientEventParamOfResponseSteer("Mention the mineral zircon.", steered)
				if err := conn.Send(ctx, steer); err != nil {
					t.Fatalf("Send steer: %v", err)
				}
				sent = true
			}
		case "response.incomplete":
			r := ev.AsResponseIncomplete().Response
			if r.ID != steered || r.IncompleteDetails.Reason != "steered" {
				t.Fatalf("incomplete %s", ev.RawJSON())
			}
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			if r.ID != successor || successor == "" || !accepted {
				t.Fatalf("completed %s before the steer took effect", r.ID)
			}
			if r.PreviousResponseID != steered || !strings.Contains(r.OutputText(), "zircon") {
				t.Fatalf("successor previous_response_id %q, text %q", r.PreviousResponseID, r.OutputText())
			}
			if acc.Snapshot().OutputText() != r.OutputText() {
				t.Fatalf("accumulated text differs from the successor's output")
			}
			return
		}
	}
}
