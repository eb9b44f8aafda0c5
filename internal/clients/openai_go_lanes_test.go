package clients_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
)

// laneEvents reads lane's events up to its terminal event, checking that every one carries
// streamID, and returns their types and the terminal Response.
func laneEvents(ctx context.Context, lane *responses.ResponseLane, streamID string) ([]string, *responses.Response, error) {
	var types []string
	for {
		ev, err := lane.Recv(ctx)
		if err != nil {
			return types, nil, err
		}
		var head struct {
			StreamID *string `json:"stream_id"`
		}
		if err := json.Unmarshal([]byte(ev.RawJSON()), &head); err != nil || head.StreamID == nil || *head.StreamID != streamID {
			return types, nil, &laneError{streamID, ev.RawJSON()}
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			var end struct {
				Response responses.Response `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.RawJSON()), &end); err != nil {
				return types, nil, err
			}
			return types, &end.Response, nil
		case "error":
			return types, nil, &laneError{streamID, ev.RawJSON()}
		}
	}
}

type laneError struct{ lane, frame string }

func (e *laneError) Error() string {
	if len(e.frame) > 400 {
		e.frame = e.frame[:400]
	}
	return "lane " + e.lane + ": unexpected frame " + e.frame
}

// TestGoTwoLanes: openai-go v3.99.0 drives two lanes (stream_id) of one connection with its
// Lane API: a slow answer on lane "slow" and, meanwhile, a tool call and its continuation on
// lane "tools"; each lane gets only its own events, each carrying its stream_id; the tool lane
// finishes its two responses (the continuation resumed in place: the hot path) while the slow
// one is still sampling.
func TestGoTwoLanes(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn, server: server.Options{
		Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true}),
	}})
	ctx := testContext(t)
	conn := connect(t, ctx, f)
	slow, err := conn.Lane("slow")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := conn.Lane("tools")
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var ends []string // lane names in the order their last response ended
	ended := func(lane string) { mu.Lock(); ends = append(ends, lane); mu.Unlock() }

	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), StreamID: openai.String("slow"),
		Metadata: shared.Metadata{"sim.speed": "1000", "sim.answer_tokens": "2000"},
		Input:    textInput("Tell me a long story."),
	})
	if err != nil {
		t.Fatalf("Create on lane slow: %v", err)
	}
	var slowTypes []string
	var slowResp *responses.Response
	var slowErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		slowTypes, slowResp, slowErr = laneEvents(ctx, slow, "slow")
		ended("slow")
	})

	toolParams := []responses.ToolUnionParam{weatherTool()}
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), StreamID: openai.String("tools"), Tools: toolParams,
		Input: itemsInput(responses.ResponseInputItemParamOfMessage("What is the weather in Oslo?", responses.EasyInputMessageRoleUser)),
	})
	if err != nil {
		t.Fatalf("Create on lane tools: %v", err)
	}
	_, r1, err := laneEvents(ctx, tools, "tools")
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseFunctionToolCall
	for _, item := range r1.Output {
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	if call.CallID == "" {
		t.Fatalf("lane tools: want a function call, got %s", r1.RawJSON())
	}
	hot0 := f.srv.Counters().Hot.Load()
	output := responses.ResponseInputItemParamOfFunctionCallOutput("-3C and snowing")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), StreamID: openai.String("tools"), Tools: toolParams,
		PreviousResponseID: openai.String(r1.ID), Input: itemsInput(output),
	})
	if err != nil {
		t.Fatalf("Create (continuation) on lane tools: %v", err)
	}
	r2, err := tools.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("lane tools FinalResponse: %v", err)
	}
	ended("tools")
	if hot := f.srv.Counters().Hot.Load() - hot0; hot != 1 {
		t.Errorf("the same-lane tool continuation took the hot path %d times, want 1", hot)
	}
	wg.Wait()

	if slowErr != nil {
		t.Fatal(slowErr)
	}
	if slowResp.Status != responses.ResponseStatusCompleted || slowTypes[0] != "response.created" {
		t.Fatalf("lane slow: status %q, events %v", slowResp.Status, slowTypes[:min(len(slowTypes), 3)])
	}
	if r2.Status != responses.ResponseStatusCompleted || r2.PreviousResponseID != r1.ID ||
		!strings.Contains(r2.OutputText(), "-3C and snowing") || !strings.Contains(r2.OutputText(), "What is the weather in Oslo?") {
		t.Fatalf("lane tools continuation: status %q prev %q text %q", r2.Status, r2.PreviousResponseID, r2.OutputText())
	}
	if strings.Contains(slowResp.OutputText(), "Oslo") || strings.Contains(r2.OutputText(), "long story") {
		t.Fatalf("the lanes' contexts are mixed")
	}
	if len(ends) != 2 || ends[0] != "tools" {
		t.Fatalf("lanes ended in order %v: the slow lane held the tool lane back", ends)
	}
}
