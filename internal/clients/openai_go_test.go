package clients_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// goClient is openai-go pointed at the fixture, with no retries.
func goClient(f *fixture) openai.Client {
	return openai.NewClient(option.WithAPIKey("sk-test"), option.WithBaseURL(f.base+"/"), option.WithMaxRetries(0))
}

func connect(t *testing.T, ctx context.Context, f *fixture) *responses.ResponseConnection {
	t.Helper()
	client := goClient(f)
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func textInput(s string) responses.ResponsesClientEventResponseCreateInputUnionParam {
	return responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(s)}
}

func itemsInput(items ...responses.ResponseInputItemUnionParam) responses.ResponsesClientEventResponseCreateInputUnionParam {
	list := responses.ResponseInputParam(items)
	return responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &list}
}

// weatherTool is a plain function tool (not shell-like): the sim fills its required "location".
func weatherTool() responses.ToolUnionParam {
	return responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"location": map[string]any{"type": "string"}},
		"required":             []string{"location"},
		"additionalProperties": false,
	}, true)
}

// TestGoWebSocketTextTurn runs one text turn with Create, Recv (every event through the SDK's
// typed decoder and its strict accumulator) and then FinalResponse on a second turn.
func TestGoWebSocketTextTurn(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	ctx := testContext(t)
	conn := connect(t, ctx, f)

	err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Input: textInput("Say hello to the Go SDK."),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var acc responses.ResponseAccumulator
	var types []string
	var completed responses.Response
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv after %v: %v", types, err)
		}
		types = append(types, ev.Type)
		if err := acc.AddEvent(ev); err != nil {
			t.Fatalf("the SDK's accumulator rejected %s: %v (%s)", ev.Type, err, ev.RawJSON())
		}
		if ev.Type == "error" {
			t.Fatalf("error event: %s", ev.RawJSON())
		}
		if ev.Type == "response.completed" {
			completed = ev.AsResponseCompleted().Response
			break
		}
	}
	if types[0] != "response.created" {
		t.Errorf("first event %s, want response.created (all: %v)", types[0], types)
	}
	snap := acc.Snapshot()
	if snap.TerminalEvent != "response.completed" || snap.ResponseID != completed.ID {
		t.Errorf("accumulator: terminal %q id %q, want response.completed %q", snap.TerminalEvent, snap.ResponseID, completed.ID)
	}
	text := completed.OutputText()
	if !strings.Contains(text, "Say hello to the Go SDK.") || !strings.Contains(text, "[ctx ") {
		t.Errorf("answer does not quote the input: %q", text)
	}
	if snap.OutputText() != text {
		t.Errorf("accumulated deltas %q != final text %q", snap.OutputText(), text)
	}
	if completed.Status != responses.ResponseStatusCompleted || completed.Usage.OutputTokens == 0 {
		t.Errorf("status %q usage %+v", completed.Status, completed.Usage)
	}

	// A second turn on the same socket, chained, read with FinalResponse.
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), PreviousResponseID: openai.String(completed.ID),
		Input: textInput("And once more."),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r2, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("FinalResponse: %v", err)
	}
	if r2.PreviousResponseID != completed.ID || !strings.Contains(r2.OutputText(), "Say hello to the Go SDK.") ||
		!strings.Contains(r2.OutputText(), "And once more.") {
		t.Errorf("chained answer lost the history: prev %q text %q", r2.PreviousResponseID, r2.OutputText())
	}
}

// TestGoWebSocketToolCallContinuation: the sim calls the function tool, the SDK sends the
// function_call_output with previous_response_id, and the continuation takes the hot path.
func TestGoWebSocketToolCallContinuation(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	ctx := testContext(t)
	conn := connect(t, ctx, f)
	tools := []responses.ToolUnionParam{weatherTool()}

	err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Tools: tools,
		Input: itemsInput(responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r1, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("FinalResponse: %v", err)
	}
	var call responses.ResponseFunctionToolCall
	for _, item := range r1.Output {
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	if call.CallID == "" || call.Name != "get_weather" || !strings.Contains(call.Arguments, `"location"`) {
		t.Fatalf("want a get_weather call, got output %s", r1.RawJSON())
	}

	hot0 := f.srv.Counters().Hot.Load()
	output := responses.ResponseInputItemParamOfFunctionCallOutput("18C and cloudy over the Seine")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Tools: tools,
		PreviousResponseID: openai.String(r1.ID), Input: itemsInput(output),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r2, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("FinalResponse: %v", err)
	}
	if r2.Status != responses.ResponseStatusCompleted || r2.PreviousResponseID != r1.ID {
		t.Fatalf("continuation: status %q prev %q", r2.Status, r2.PreviousResponseID)
	}
	text := r2.OutputText()
	for _, want := range []string{"What is the weather in Paris?", "18C and cloudy over the Seine"} {
		if !strings.Contains(text, want) {
			t.Errorf("answer does not quote %q: %q", want, text)
		}
	}
	if hot := f.srv.Counters().Hot.Load() - hot0; hot != 1 {
		t.Errorf("hot-path counter moved by %d, want 1", hot)
	}
	if r2.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("hot continuation reports no cached tokens: %+v", r2.Usage)
	}
}

// TestGoPreviousResponseNotFound: an unknown previous_response_id surfaces from FinalResponse
// as *responses.ResponseProtocolError, and the socket stays usable.
func TestGoPreviousResponseNotFound(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	ctx := testContext(t)
	conn := connect(t, ctx, f)

	err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), PreviousResponseID: openai.String("resp_does_not_exist"),
		Input: textInput("hello?"),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, err = conn.FinalResponse(ctx)
	var perr *responses.ResponseProtocolError
	if !errors.As(err, &perr) {
		t.Fatalf("FinalResponse error %T %v, want *responses.ResponseProtocolError", err, err)
	}
	e := perr.Event.AsResponsesServerEventResponseWsError()
	if perr.Event.Type != "error" || e.Status != 400 || e.Error.Code != "previous_response_not_found" ||
		e.Error.Param != "previous_response_id" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
		t.Fatalf("error event %s", perr.Event.RawJSON())
	}

	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Input: textInput("still there?"),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r, err := conn.FinalResponse(ctx)
	if err != nil || !strings.Contains(r.OutputText(), "still there?") {
		t.Fatalf("socket unusable after the error: %v", err)
	}
}

// TestGoHTTPStreaming runs client.Responses.NewStreaming (POST + SSE) and accumulates every
// event with the SDK's accumulator.
func TestGoHTTPStreaming(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	ctx := testContext(t)
	client := goClient(f)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: shared.ResponsesModel("sim"), Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream this over SSE, please.")},
	})
	defer stream.Close()
	var acc responses.ResponseAccumulator
	var types []string
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		var wsEv responses.ResponsesServerEventUnion // the same event vocabulary as over WebSocket
		if err := wsEv.UnmarshalJSON([]byte(ev.RawJSON())); err != nil {
			t.Fatalf("decode %s: %v", ev.Type, err)
		}
		if err := acc.AddEvent(wsEv); err != nil {
			t.Fatalf("the SDK's accumulator rejected %s: %v (%s)", ev.Type, err, ev.RawJSON())
		}
		if ev.Type == "response.completed" {
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v (events %v)", err, types)
	}
	if len(types) < 3 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	if f.posts.Load() != 1 {
		t.Errorf("server saw %d POSTs, want 1", f.posts.Load())
	}
	snap := acc.Snapshot()
	if completed.Status != responses.ResponseStatusCompleted || snap.TerminalEvent != "response.completed" ||
		!strings.Contains(completed.OutputText(), "Stream this over SSE, please.") || snap.OutputText() != completed.OutputText() {
		t.Fatalf("final %q (%q), accumulated %q", completed.Status, completed.OutputText(), snap.OutputText())
	}
}

// TestGoShutdownLetsResumedResponseFinish: a graceful shutdown (and the connection age limit,
// which drains the same way) lets the sampling response finish within the grace — also when it
// is a hot-path continuation, which is every Codex step after the first.
func TestGoShutdownLetsResumedResponseFinish(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn, server: server.Options{
		Model:  sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true}), // TTFT 500ms
		Limits: session.Limits{ShutdownGrace: 20 * time.Second},
	}})
	ctx := testContext(t)
	conn := connect(t, ctx, f)
	tools := []responses.ToolUnionParam{weatherTool()}
	err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Tools: tools, Input: textInput("Weather in Rome?"),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r1, err := conn.FinalResponse(ctx)
	if err != nil || len(r1.Output) != 1 || r1.Output[0].Type != "function_call" {
		t.Fatalf("want a function call: %v %v", err, r1)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("31C, clear")
	output.OfFunctionCallOutput.CallID = openai.String(r1.Output[0].CallID)
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Store: openai.Bool(false), Tools: tools, PreviousResponseID: openai.String(r1.ID), Input: itemsInput(output),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Shut down once the resumed rollout samples — typically while it waits for its first token
	// (TTFT 500ms): it holds the sampling slot, but compat has sent nothing yet (response.created
	// comes with the first event).
	for deadline := time.Now().Add(10 * time.Second); f.srv.Metrics().Sampling.Load() != 1; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the continuation never started sampling")
		}
	}
	shutdown := make(chan error, 1)
	go func() { shutdown <- f.srv.Shutdown(ctx) }()
	r2, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("FinalResponse: %v", err)
	}
	if r2.Status != responses.ResponseStatusCompleted || !strings.Contains(r2.OutputText(), "31C, clear") {
		t.Errorf("the in-flight continuation did not finish: status %q, reason %q, text %q",
			r2.Status, r2.IncompleteDetails.Reason, r2.OutputText())
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
