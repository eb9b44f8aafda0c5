package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/sim"
)

// eventually polls cond for up to 10 s (a state to reach, not a speed to meet).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestChainCancelAbortsUpstream: cancelling a sampling rollout aborts its upstream request
// (no orphan generation) and frees the pinned slot.
func TestChainCancelAbortsUpstream(t *testing.T) {
	front, m, p := chain(t, chat.Options{Slots: 1})
	c := dialAppend(t, front)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "tell a long story",
		"metadata": map[string]string{"sim.speed": "65", "sim.answer_tokens": "5000"}})
	fs := c.Until("response.output_text.delta")
	c.Send(map[string]any{"type": "response.cancel", "response_id": fs[0].Str("response", "id")})
	fs = c.Until("response.incomplete", "response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.incomplete" {
		t.Fatalf("cancel ended the response %s %v", last.Type(), last)
	}
	eventually(t, "the upstream request aborted", func() bool { return p.abortedCount() == 1 })
	eventually(t, "the slot freed", func() bool { return m.Pinned() == 0 })
}

// TestChainParallelCalls: three parallel calls cross the chain with the upstream's ids, and the
// continuation sends them as one assistant message with three tool_calls.
func TestChainParallelCalls(t *testing.T) {
	front, _, p := chain(t, chat.Options{Slots: 1})
	c := dialAppend(t, front)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "weather in three cities",
		"tools": []any{weather}, "metadata": map[string]string{"sim.parallel": "3"}})
	fs := c.Until("response.done", "response.failed")
	done := fs[len(fs)-1]
	ids, _ := done.Get("pending_call_ids").([]any)
	if done.Type() != "response.done" || len(ids) != 3 {
		t.Fatalf("%s with pending %v", done.Type(), done.Get("pending_call_ids"))
	}
	var input []any
	for _, id := range ids {
		input = append(input, map[string]any{"type": "function_call_output", "call_id": id, "output": "fine"})
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": input})
	fs = c.Until("response.completed", "response.failed", "response.incomplete")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("ended %s: %v", last.Type(), last)
	}
	reqs := p.requests()
	got := describe(reqs[1].Messages)
	if len(got) != 5 || len(reqs[1].Messages[1].ToolCalls) != 3 {
		t.Fatalf("second request: %v", got)
	}
	for i, id := range ids {
		if tc := reqs[1].Messages[1].ToolCalls[i]; tc.ID != id || reqs[1].Messages[2+i].ToolCallID != id {
			t.Fatalf("call %d: id %s, tool message for %s; want %s", i, tc.ID, reqs[1].Messages[2+i].ToolCallID, id)
		}
	}
}

// TestChainPublicHTTPColdPath: with the official client over HTTP, a continuation by
// previous_response_id is rebuilt on the cold path in the front, yet the pinned upstream slot
// (the one freed last) still holds the conversation, so the upstream reports cached tokens.
func TestChainPublicHTTPColdPath(t *testing.T) {
	front, m, _ := chain(t, chat.Options{Slots: 2})
	client := openai.NewClient(option.WithAPIKey("sk-test"), option.WithBaseURL(front+"/v1/"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "required": []string{"location"},
		"properties": map[string]any{"location": map[string]any{"type": "string"}}, "additionalProperties": false}, true)
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sim", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Oslo")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Output) != 1 || r1.Output[0].Type != "function_call" || r1.Output[0].Arguments.OfString != `{"location":"Oslo"}` {
		t.Fatalf("first response output %+v", r1.Output)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("cold and clear")
	output.OfFunctionCallOutput.CallID = openai.String(r1.Output[0].CallID)
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sim", PreviousResponseID: openai.String(r1.ID),
		Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r2.OutputText(), `tool: "cold and clear"`) {
		t.Fatalf("answer %q", r2.OutputText())
	}
	if r2.Usage.InputTokensDetails.CachedTokens <= 0 || r2.Usage.InputTokensDetails.CachedTokens >= r2.Usage.InputTokens {
		t.Fatalf("usage %+v: want the upstream slot's cached tokens", r2.Usage)
	}
	eventually(t, "slots freed", func() bool { return m.Pinned() == 0 })
}

// TestChainServesChatCompletions: the front serves /v1/chat/completions over its chat backend
// (two hops of Chat Completions), and a continuation on the same front slot is hot end to end.
func TestChainServesChatCompletions(t *testing.T) {
	front, _, _ := chain(t, chat.Options{Slots: 1})
	client := openai.NewClient(option.WithAPIKey("sk-test"), option.WithBaseURL(front+"/v1/"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello through two hops")}
	c1, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c1.Choices[0].Message.Content, `user: "hello through two hops"`) {
		t.Fatalf("answer %q", c1.Choices[0].Message.Content)
	}
	msgs = append(msgs, c1.Choices[0].Message.ToParam(), openai.UserMessage("again"))
	c2, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Usage.PromptTokensDetails.CachedTokens <= c1.Usage.PromptTokens {
		t.Fatalf("second turn cached %d, first prompt %d", c2.Usage.PromptTokensDetails.CachedTokens, c1.Usage.PromptTokens)
	}
}

// TestChainCarriesImages: input_image parts (a URL, a data URL; detail) cross the chain as
// Chat Completions image_url parts, which the upstream Tether's /v1/chat/completions takes back
// as input_image parts: the rollout completes, the upstream request holds the exact parts, and
// the upstream sim's answer saw the image in its context.
func TestChainCarriesImages(t *testing.T) {
	front, _, p := chain(t, chat.Options{})
	c := dialAppend(t, front)
	create := map[string]any{"type": "response.create", "model": "sim", "input": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": "What is in "},
			map[string]any{"type": "input_text", "text": "these pictures?"},
			map[string]any{"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"},
			map[string]any{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
		}}}}
	c.Send(create)
	fs := c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" {
		t.Fatalf("%s %v", last.Type(), last.Get("response", "error"))
	}
	reqs := p.requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != 1 {
		t.Fatalf("upstream requests %+v", reqs)
	}
	want := `[{"type":"text","text":"What is in "},{"type":"text","text":"these pictures?"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]`
	if got := string(reqs[0].Messages[0].Content); got != want {
		t.Fatalf("upstream content\n got %s\nwant %s", got, want)
	}
	// The upstream sim saw the images: its answer (which quotes the context's size and
	// fingerprint) equals a sim's that is sent the create directly.
	_, direct := servertest.Start(t, server.Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant})})
	d := dialAppend(t, direct)
	d.Send(create)
	ds := d.Until("response.completed", "response.failed", "response.incomplete")
	if got, want := answerText(last), answerText(ds[len(ds)-1]); got != want || !strings.Contains(got, "[ctx") {
		t.Errorf("the chain's answer %q, a direct sim's %q", got, want)
	}
}

// answerText is the text of the first message of a terminal event's response.
func answerText(f wstest.Frame) string {
	out, _ := f.Get("response", "output").([]any)
	for _, it := range out {
		m := wstest.Frame(it.(map[string]any))
		if parts, _ := m.Get("content").([]any); m.Str("type") == "message" && len(parts) > 0 {
			return wstest.Frame(parts[0].(map[string]any)).Str("text")
		}
	}
	return ""
}

// TestChainRejectsWhatChatCannotCarry: parts Chat Completions has no form for (an image by
// file_id, an image in a system message, a file) are refused at create (400 naming them); in an
// append they fail the step with invalid_prompt, and the pinned slot is freed.
func TestChainRejectsWhatChatCannotCarry(t *testing.T) {
	front, m, _ := chain(t, chat.Options{Slots: 1})
	c := dialAppend(t, front)
	msg := func(role string, part map[string]any) map[string]any {
		return map[string]any{"type": "message", "role": role, "content": []any{part}}
	}
	file := msg("user", map[string]any{"type": "input_file", "file_id": "file-1"})
	for _, bad := range []map[string]any{
		msg("user", map[string]any{"type": "input_image", "file_id": "file-1"}),
		msg("system", map[string]any{"type": "input_image", "image_url": "https://example.com/cat.png"}),
		file,
	} {
		c.Send(map[string]any{"type": "response.create", "model": "sim", "input": []any{bad}})
		c.ExpectError(400, "invalid_value", "input[0].content")
	}
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "weather here", "tools": []any{weather}})
	fs := c.Until("response.done", "response.failed")
	done := fs[len(fs)-1]
	ids, _ := done.Get("pending_call_ids").([]any)
	if len(ids) != 1 {
		t.Fatalf("%s: %v", done.Type(), done)
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "ok"}, file}})
	fs = c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "invalid_prompt" {
		t.Fatalf("append with a file: %s %v", last.Type(), last.Get("response", "error"))
	}
	eventually(t, "the slot freed", func() bool { return m.Pinned() == 0 })
}

// TestChainSendsSamplingSettings: the Responses sampling fields reach the Chat Completions
// upstream: temperature, top_p, presence_penalty, frequency_penalty, text.verbosity and
// reasoning.effort; the upstream Tether accepts them.
func TestChainSendsSamplingSettings(t *testing.T) {
	front, _, p := chain(t, chat.Options{})
	c := dialAppend(t, front)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "hello", "temperature": 0.5, "top_p": 0.9,
		"presence_penalty": -0.5, "frequency_penalty": 1.25, "text": map[string]any{"verbosity": "low"},
		"reasoning": map[string]any{"effort": "high"}})
	fs := c.Until("response.completed", "response.failed", "response.incomplete")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("%s %v", last.Type(), last.Get("response", "error"))
	}
	reqs := p.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	r := reqs[0]
	if r.Temperature == nil || *r.Temperature != 0.5 || r.TopP == nil || *r.TopP != 0.9 ||
		r.PresencePenalty == nil || *r.PresencePenalty != -0.5 || r.FrequencyPenalty == nil || *r.FrequencyPenalty != 1.25 ||
		r.Verbosity != "low" || r.ReasoningEffort != "high" {
		t.Fatalf("upstream request settings: temperature %v top_p %v presence %v frequency %v verbosity %q effort %q",
			r.Temperature, r.TopP, r.PresencePenalty, r.FrequencyPenalty, r.Verbosity, r.ReasoningEffort)
	}
}

// TestChainCancelledStepUsage: a step cancelled mid-stream, before the engine reported usage,
// counts what Tether knows: the output tokens it streamed (one per delta here) and, as its
// input, the prompt tokens the engine reported for the conversation's previous step (a lower
// bound: the prompt only grows).
func TestChainCancelledStepUsage(t *testing.T) {
	front, _, _ := chain(t, chat.Options{Slots: 1})
	c := dialAppend(t, front)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "weather in Paris", "tools": []any{weather},
		"metadata": map[string]string{"sim.speed": "65", "sim.answer_tokens": "5000"}})
	fs := c.Until("response.done", "response.failed", "response.completed")
	done := fs[len(fs)-1]
	var callID string
	for _, f := range fs {
		if f.Type() == "response.output_item.done" {
			callID = f.Str("item", "call_id")
		}
	}
	in1, out1 := done.Num("usage", "input_tokens"), done.Num("usage", "output_tokens")
	if done.Type() != "response.done" || callID == "" || in1 <= 0 {
		t.Fatalf("first step ended %s, call %q, usage %v", done.Type(), callID, done.Get("usage"))
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"),
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "sunny"}}})
	fs = c.Until("response.output_text.delta")
	c.Send(map[string]any{"type": "response.cancel", "response_id": done.Str("response_id")})
	fs = append(fs, c.Until("response.incomplete", "response.completed", "response.failed")...)
	last := fs[len(fs)-1]
	if last.Type() != "response.incomplete" {
		t.Fatalf("cancel ended the response %s %v", last.Type(), last)
	}
	deltas := 0
	for _, f := range fs {
		if f.Type() == "response.output_text.delta" && f.Str("delta") != "" {
			deltas++
		}
	}
	in, out, cached := last.Num("response", "usage", "input_tokens"), last.Num("response", "usage", "output_tokens"),
		last.Num("response", "usage", "input_tokens_details", "cached_tokens")
	if in != 2*in1 || out-out1 != deltas || cached != done.Num("usage", "input_tokens_details", "cached_tokens") {
		t.Fatalf("usage %v after a first step of %v and %d deltas: want the cancelled step to count %v input (the first step's prompt), %d output, no cached",
			last.Get("response", "usage"), done.Get("usage"), deltas, in1, deltas)
	}
}
