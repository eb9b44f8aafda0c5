package clients_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
)

// TestGoBackground: openai-go v3.99.0's background helpers against Tether over HTTP.
// Responses.New with Background answers at once (queued or in_progress); Get polls it;
// NewStreaming with Background is dropped after three events and GetStreaming with
// StartingAfter picks the stream up at the next sequence_number and follows it to
// response.completed; Cancel ends a running background response (status cancelled), and is
// refused for a response created without Background.
func TestGoBackground(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn, server: server.Options{
		Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true}),
	}})
	ctx := testContext(t)
	client := goClient(f)
	slow := func(tokens string) shared.Metadata {
		return shared.Metadata{"sim.speed": "1000", "sim.answer_tokens": tokens}
	}

	// Poll.
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("poll me")},
		Background: openai.Bool(true), Metadata: slow("300"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if (r.Status != responses.ResponseStatusQueued && r.Status != responses.ResponseStatusInProgress) || !r.Background {
		t.Fatalf("New with Background: status %s background %v", r.Status, r.Background)
	}
	got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != r.ID {
		t.Fatalf("Get: %v %v", got, err)
	}

	// Resume a dropped stream.
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream me")},
		Background: openai.Bool(true), Metadata: slow("300"),
	})
	var id string
	var last int64
	for i := 0; i < 3 && stream.Next(); i++ {
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		last = ev.SequenceNumber
	}
	if err := stream.Err(); err != nil || id == "" {
		t.Fatalf("NewStreaming: %v (id %q)", err, id)
	}
	_ = stream.Close() // the client goes; the response runs on
	resumed := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	var types []string
	var end responses.Response
	next := last + 1
	for resumed.Next() {
		ev := resumed.Current()
		if ev.SequenceNumber != next {
			t.Fatalf("resumed event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, next)
		}
		next++
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			end = ev.Response
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatalf("GetStreaming: %v", err)
	}
	if end.ID != id || end.Status != responses.ResponseStatusCompleted || end.OutputText() == "" {
		t.Fatalf("the resumed stream ended %v (%d events: %v)", end.Status, len(types), types)
	}

	// Cancel.
	long, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("cancel me")},
		Background: openai.Bool(true), Metadata: slow("1000000"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := client.Responses.Cancel(ctx, long.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("Cancel: %v %v", cancelled, err)
	}
	if got, err := client.Responses.Get(ctx, long.ID, responses.ResponseGetParams{}); err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("Get after Cancel: %v %v", got, err)
	}
	fg, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Cancel(ctx, fg.ID)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "Cannot cancel a synchronous response." {
		t.Fatalf("Cancel of a synchronous response: %v", err)
	}
	if n := f.srv.Background().Running(); n != 0 {
		t.Fatalf("%d background responses still running", n)
	}
}

// TestNodeBackground runs testdata/node/background.mjs: openai-node's background helpers
// (create with background and stream, retrieve with stream and starting_after, the stream
// helper with response_id, retrieve, cancel) against Tether.
func TestNodeBackground(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn, server: server.Options{
		Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true}),
	}})
	out := runNode(t, f, "background.mjs")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if n := f.srv.Background().Running(); n != 0 {
		t.Fatalf("%d background responses still running", n)
	}
}
