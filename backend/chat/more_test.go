package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tetherd/tether/backend/chat"
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

// TestChainRejectsWhatChatCannotCarry: an image part is refused at create (400 naming it); in
// an append it fails the step with invalid_prompt, and the pinned slot is freed.
func TestChainRejectsWhatChatCannotCarry(t *testing.T) {
	front, m, _ := chain(t, chat.Options{Slots: 1})
	c := dialAppend(t, front)
	image := map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_image", "image_url": "https://example.com/cat.png"}}}
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": []any{image}})
	c.ExpectError(400, "invalid_value", "input[0].content")
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "weather here", "tools": []any{weather}})
	fs := c.Until("response.done", "response.failed")
	done := fs[len(fs)-1]
	ids, _ := done.Get("pending_call_ids").([]any)
	if len(ids) != 1 {
		t.Fatalf("%s: %v", done.Type(), done)
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "ok"}, image}})
	fs = c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "invalid_prompt" {
		t.Fatalf("append with an image: %s %v", last.Type(), last.Get("response", "error"))
	}
	eventually(t, "the slot freed", func() bool { return m.Pinned() == 0 })
}
