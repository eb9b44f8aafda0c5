package chatapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// start runs Tether with the instant sim and returns an openai-go client and the base URL.
func start(t *testing.T, opts server.Options) (openai.Client, string) {
	t.Helper()
	if opts.Model == nil {
		opts.Model = sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant})
	}
	_, url := servertest.Start(t, opts)
	return openai.NewClient(option.WithAPIKey("sk-test"), option.WithBaseURL(url+"/v1/"), option.WithMaxRetries(0)), url
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"location"},
			"properties": map[string]any{"location": map[string]any{"type": "string"}}},
	})
}

func TestCompletionJSON(t *testing.T) {
	client, _ := start(t, server.Options{})
	c, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello there")}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("completion %+v", c)
	}
	if got := c.Choices[0].Message.Content; !strings.Contains(got, `user: "hello there"`) {
		t.Fatalf("content %q does not quote the user", got)
	}
	if c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Fatalf("usage %+v", c.Usage)
	}
}

// stream runs a streamed request and returns the accumulated completion.
func stream(t *testing.T, client openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) openai.ChatCompletion {
	t.Helper()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(ctx(t), p, opts...)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc.ChatCompletion
}

// TestStreamToolTurnThenHotAnswer runs a two-turn tool conversation on slot 0: the first turn
// streams a tool call, the second (with the tool's output) reuses the slot, so its cached
// tokens are the whole first request plus the call.
func TestStreamToolTurnThenHotAnswer(t *testing.T) {
	client, url := start(t, server.Options{})
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris")}
	p := openai.ChatCompletionNewParams{Model: "sim", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool()}}
	slot := option.WithJSONSet("id_slot", 0)
	c1 := stream(t, client, p, slot)
	ch := c1.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("first turn: %+v", ch)
	}
	call := ch.Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Function.Arguments != `{"location":"Paris"}` || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("call %+v", call)
	}
	if c1.Usage.PromptTokens == 0 || c1.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first usage %+v", c1.Usage)
	}
	p.Messages = append(msgs, ch.Message.ToParam(), openai.ToolMessage("sunny", call.ID))
	c2 := stream(t, client, p, slot)
	if c2.Choices[0].FinishReason != "stop" || !strings.Contains(c2.Choices[0].Message.Content, `tool: "sunny"`) {
		t.Fatalf("second turn: %+v", c2.Choices[0])
	}
	cached := c2.Usage.PromptTokensDetails.CachedTokens
	if cached <= c1.Usage.PromptTokens || cached >= c2.Usage.PromptTokens {
		t.Fatalf("second turn cached %d of %d (first prompt %d): want the first turn and its call cached", cached, c2.Usage.PromptTokens, c1.Usage.PromptTokens)
	}
	// Another conversation on the same slot starts cold.
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("something else")}
	c3 := stream(t, client, p, slot)
	if c3.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("a new conversation reports %d cached tokens", c3.Usage.PromptTokensDetails.CachedTokens)
	}
	var slots []struct {
		ID    int `json:"id"`
		Items int `json:"n_items"`
	}
	// The slot is handed back just after the client has read the stream's end: poll briefly.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		getJSON(t, url+"/slots", &slots)
		if len(slots) == 4 && slots[0].Items == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots %+v", slots)
		}
	}
}

// TestPickedSlotPrefersLongestPrefix: without id_slot, a continuation finds the slot that
// holds its conversation, even after other conversations used other slots.
func TestPickedSlotPrefersLongestPrefix(t *testing.T) {
	client, _ := start(t, server.Options{Slots: 2})
	first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("first conversation")}
	c1, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim", Messages: first})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("second conversation")}}); err != nil {
		t.Fatal(err)
	}
	next := append(first, c1.Choices[0].Message.ToParam(), openai.UserMessage("and more"))
	c3, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim", Messages: next})
	if err != nil {
		t.Fatal(err)
	}
	if c3.Usage.PromptTokensDetails.CachedTokens <= c1.Usage.PromptTokens {
		t.Fatalf("continuation cached %d, first prompt %d", c3.Usage.PromptTokensDetails.CachedTokens, c1.Usage.PromptTokens)
	}
	// cache_prompt:false processes everything again.
	c4, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim", Messages: next}, option.WithJSONSet("cache_prompt", false))
	if err != nil {
		t.Fatal(err)
	}
	if c4.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("cache_prompt false: cached %d", c4.Usage.PromptTokensDetails.CachedTokens)
	}
}

func TestMaxTokensFinishesWithLength(t *testing.T) {
	client, _ := start(t, server.Options{})
	c := stream(t, client, openai.ChatCompletionNewParams{Model: "sim", MaxCompletionTokens: openai.Int(3),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a long story please")}})
	if c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 3 {
		t.Fatalf("finish %q, usage %+v", c.Choices[0].FinishReason, c.Usage)
	}
}

func TestErrors(t *testing.T) {
	client, url := start(t, server.Options{Limits: session.Limits{MaxFrame: 4096}, Slots: 1})
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"model":"sim","messages":[{"role":"robot","content":"x"}]}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[]}`, 400, "missing_required_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"id_slot":7}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"max"}}]}]}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"x"}]}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"metadata":{"sim.calls":"many"}}`, 400, "invalid_value"},
		{`{"model":`, 400, "invalid_json"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, 400, "invalid_type"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"temperature":99}`, 400, "decimal_above_max_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"top_p":-1}`, 400, "decimal_below_min_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"presence_penalty":2.5}`, 400, "decimal_above_max_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"frequency_penalty":-3}`, 400, "decimal_below_min_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"verbosity":"loud"}`, 400, "invalid_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"max_completion_tokens":-5}`, 400, "integer_below_min_value"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"n":2}`, 400, "unsupported_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"temprature":0.5}`, 400, "unknown_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"seed":7}`, 400, "unsupported_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"stop":["\n"]}`, 400, "unsupported_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"logprobs":true}`, 400, "unsupported_parameter"},
		{`{"model":"sim","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "request_body_too_large"},
		{`{"model":"sim","messages":[{"role":"user","content":"x"}],"metadata":{"sim.fail":"step:0"}}`, 500, "server_error"},
	} {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct {
				Code, Type, Message string
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || env.Error.Code != tc.code || env.Error.Message == "" {
			t.Errorf("%.60s: status %d, error %+v (%v); want %d %s", tc.body, resp.StatusCode, env.Error, err, tc.status, tc.code)
		}
	}
	// The official client sees the error as an *openai.Error.
	_, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.ToolMessage("x", "")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("tool message without id: %v", err)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

// TestImageParts: a user message with image_url parts (a URL, a data URL) is served: the
// parts reach the model as input_image parts in order (the sim's context counts them), and
// the official client sends them as it builds them.
func TestImageParts(t *testing.T) {
	client, url := start(t, server.Options{})
	ask := func(parts ...openai.ChatCompletionContentPartUnionParam) string {
		t.Helper()
		c, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parts)}})
		if err != nil {
			t.Fatal(err)
		}
		return c.Choices[0].Message.Content
	}
	text := openai.TextContentPart("what is this?")
	plain := ask(text)
	withImages := ask(text,
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.png", Detail: "low"}),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}))
	if !strings.Contains(withImages, `user: "what is this?"`) || withImages == plain {
		t.Fatalf("with images %q, without %q: the images did not reach the model", withImages, plain)
	}
	// The same message as Responses input_image parts gives the same context, so the same answer.
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(`{"model":"sim","store":false,"input":[{"role":"user","content":[`+
		`{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":"https://example.com/cat.png","detail":"low"},`+
		`{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Output []struct{ Content []struct{ Text string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Output) != 1 || len(r.Output[0].Content) != 1 {
		t.Fatalf("POST /v1/responses: %d %+v %v", resp.StatusCode, r, err)
	}
	if got := r.Output[0].Content[0].Text; got != withImages {
		t.Fatalf("Responses answer %q, chat answer %q", got, withImages)
	}
}

// TestChatCompletionsMethod: a method other than POST gets 405 with an Allow header and the
// JSON error envelope.
func TestChatCompletionsMethod(t *testing.T) {
	_, url := start(t, server.Options{})
	resp, err := http.Get(url + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct{ Code, Type, Message string }
	}
	err = json.NewDecoder(resp.Body).Decode(&env)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" ||
		env.Error.Code != "method_not_allowed" || env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, "GET /v1/chat/completions") {
		t.Fatalf("GET: %d Allow %q, %+v (%v)", resp.StatusCode, resp.Header.Get("Allow"), env.Error, err)
	}
}

// TestAdvisoryMembersAccepted: members OpenAI has that do not change the answer (user, store,
// service_tier…), and unserved ones without a value (stop: null, logprobs: false), are
// accepted.
func TestAdvisoryMembersAccepted(t *testing.T) {
	_, url := start(t, server.Options{Slots: 1})
	body := `{"model":"sim","messages":[{"role":"user","content":"x"}],"user":"u1","store":false,"service_tier":"auto",` +
		`"prompt_cache_key":"k","safety_identifier":"s","stop":null,"logprobs":false,"top_logprobs":0,"logit_bias":{},"modalities":[]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
}

// TestMessageTextLimit: a message's content string, or one part's text, of more than 10 MiB
// characters is refused as /v1/responses refuses such an input text: 400
// string_above_max_length, the same message, param naming the message (that characters are
// counted, not bytes, protocol's TestCheckTextLength shows).
func TestMessageTextLimit(t *testing.T) {
	_, url := start(t, server.Options{})
	over := strings.Repeat("x", protocol.MaxTextLength+1)
	post := func(path string, body any) (int, protocol.Error) {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct{ Error protocol.Error }
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("%s: %d %.200s", path, resp.StatusCode, raw)
			}
		}
		return resp.StatusCode, env.Error
	}
	msg := func(role string, content any) map[string]any { return map[string]any{"role": role, "content": content} }
	_, want := post("/v1/responses", map[string]any{"model": "sim", "input": []any{msg("user", "a"), msg("user", "b"), msg("user", over)}})
	if want.Code != protocol.CodeStringAboveMaxLength || want.Param != "input[2].content" {
		t.Fatalf("/v1/responses: %+v", want)
	}
	for _, tc := range []struct {
		messages []any
		param    string
	}{
		{[]any{msg("system", "be brief"), msg("user", "a"), msg("assistant", "b"), msg("user", over)}, "messages[3].content"},
		{[]any{msg("user", []any{map[string]any{"type": "text", "text": "hi"}, map[string]any{"type": "text", "text": over}})}, "messages[0].content[1].text"},
	} {
		code, got := post("/v1/chat/completions", map[string]any{"model": "sim", "messages": tc.messages})
		wantMsg := strings.Replace(want.Message, "input[2].content", tc.param, 1)
		if code != 400 || got.Code != protocol.CodeStringAboveMaxLength || got.Param != tc.param || got.Message != wantMsg || got.Type != want.Type {
			t.Errorf("%s: %d %+v, want 400 %s %q", tc.param, code, got, tc.param, wantMsg)
		}
	}
}
