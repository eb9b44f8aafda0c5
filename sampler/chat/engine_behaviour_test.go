package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/chat"
)

// postJSON POSTs v to url and decodes the JSON answer.
func postJSON(t *testing.T, url string, v any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: %d, answer not JSON: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// TestEngineResponses serves POST /v1/responses as JSON and as SSE from a real llama-server:
// the answer streams in order and the usage is the engine's; temperature and top_p the client
// left unset echo the engine's defaults (what it used); GET /v1/models lists the engine's model.
func TestEngineResponses(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2})
	front, _, px := engineFront(t, chat.Options{Slots: 2}, eng)
	create := map[string]any{"model": llamatest.Model, "input": "weather 0 of rollout 1", "max_output_tokens": 600}

	code, r := postJSON(t, front+"/v1/responses", create)
	f := conformance.Frame{"response": r}
	if code != 200 || (f.Str("response", "status") != "completed" && f.Str("response", "status") != "incomplete") {
		t.Fatalf("POST: %d %v", code, r)
	}
	if f.Num("response", "usage", "input_tokens") <= 0 || f.Num("response", "usage", "output_tokens") <= 0 {
		t.Fatalf("usage %v: want the engine's token counts", f.Get("response", "usage"))
	}
	if temp, top := f.Get("response", "temperature"), f.Get("response", "top_p"); temp != 0.8 || top != 0.95 {
		t.Errorf("echoed temperature %v, top_p %v: want the engine's defaults 0.8 and 0.95", temp, top)
	}
	steps := px[0].waitSteps(t, 1)
	if len(steps) != 1 || steps[0].prompt != f.Num("response", "usage", "input_tokens") {
		t.Errorf("engine processed %+v, the response says %v", steps, f.Get("response", "usage"))
	}

	create["stream"] = true
	postSSE(t, front, create)

	mresp, err := http.Get(front + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(mresp.Body).Decode(&list); err != nil || len(list.Data) != 1 || list.Data[0].ID != llamatest.Model {
		t.Errorf("GET /v1/models: %+v %v, want the engine's model %q", list, err, llamatest.Model)
	}
}

// postSSE POSTs create with stream true and returns its events, each fed to the conformance
// grammar; the stream must end completed or incomplete.
func postSSE(t *testing.T, front string, create map[string]any) []conformance.Frame {
	t.Helper()
	b, _ := json.Marshal(create)
	resp, err := http.Post(front+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	g := conformance.NewGrammar(conformance.ShapePublic)
	sr := protocol.NewSSEReader(resp.Body)
	var events []conformance.Frame
	for {
		_, data, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ev conformance.Frame
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("SSE data is not JSON: %q", data)
		}
		if err := g.Feed(ev); err != nil {
			t.Fatalf("SSE grammar: %v", err)
		}
		events = append(events, ev)
	}
	var last conformance.Frame
	if len(events) > 0 {
		last = events[len(events)-1]
	}
	if err := g.Done(); err != nil || (last.Type() != "response.completed" && last.Type() != "response.incomplete") {
		t.Fatalf("SSE ended with %s: %v", last.Type(), err)
	}
	return events
}

// TestEngineSlotsChecked refuses more slots than the engine has.
func TestEngineSlotsChecked(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 3})
	if err := m.Probe(t.Context()); err == nil || !strings.Contains(err.Error(), "has 2 slots") {
		t.Fatalf("Probe with 3 slots on a 2-slot engine: %v", err)
	}
}

// TestEngineSlotContext: Probe learns the context of one slot from llama-server's /props (the
// engine's -c divided by -np), which tether serve logs at start.
func TestEngineSlotContext(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, SlotContext: 1024})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 2})
	if n := m.SlotContext(); n != 0 {
		t.Fatalf("before Probe: %d tokens, want 0", n)
	}
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := m.SlotContext(); n != 1024 {
		t.Fatalf("slot context %d tokens, want the engine's 1024", n)
	}
}

// TestEngineContextFull fills a slot's context: the response is incomplete with reason
// context_length_exceeded (no max_output_tokens was reached). A tool call the context cut off
// is not pending: a continuation answering it gets tool_call_not_found saying so.
func TestEngineContextFull(t *testing.T) {
	// The tool prompt's first call takes about 100 tokens after a 259-token prompt: a 300-token
	// context cuts it off.
	eng := llamatest.Start(t, llamatest.Options{Slots: 1, SlotContext: 300, Seed: llamatest.ToolSeed})
	front, _, _ := engineFront(t, chat.Options{Slots: 1}, eng)
	code, r := postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "input": llamatest.ToolPrompt,
		"tools": []any{llamatest.Tool}, "temperature": 1, "store": true})
	f := conformance.Frame{"response": r}
	if code != 200 || f.Str("response", "status") != "incomplete" || f.Str("response", "incomplete_details", "reason") != protocol.ReasonContextLength {
		t.Fatalf("POST: %d, status %s, incomplete_details %v: want incomplete, %s", code, f.Str("response", "status"),
			f.Get("response", "incomplete_details"), protocol.ReasonContextLength)
	}
	var call conformance.Frame
	for _, it := range f.List("response", "output") {
		if it := conformance.Frame(it.(map[string]any)); it.Type() == "function_call" {
			call = it
		}
	}
	if call == nil {
		t.Skip("the model did not start a tool call for this prompt (the engine build changed?)")
	}
	if call.Str("status") != "incomplete" {
		t.Fatalf("cut-off call has status %q, want incomplete", call.Str("status"))
	}
	code, r = postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "previous_response_id": f.Str("response", "id"),
		"tools": []any{llamatest.Tool}, "temperature": 1, "input": []any{map[string]any{"type": "function_call_output", "call_id": call.Str("call_id"), "output": "sunny"}}})
	e := conformance.Frame(r)
	if code != 400 || e.Str("error", "code") != protocol.CodeToolCallNotFound || !strings.Contains(e.Str("error", "message"), "cut off") {
		t.Fatalf("answering the cut-off call: %d %v", code, r)
	}
}

// TestEngineInputOverContext sends an input longer than a slot's context: llama-server refuses
// it (400, exceed_context_size_error), and the response ends failed with the code the sim's
// context window and OpenAI give such input, context_length_exceeded, over JSON and SSE; a
// continuation that takes the conversation past the context fails the same way; the server
// then serves a short request.
func TestEngineInputOverContext(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 1})
	front, _, _ := engineFront(t, chat.Options{Slots: 1}, eng)
	long := strings.Repeat("dreams unfold ", 1500) // about 9,000 tokens of this model: over the 2,048 of a slot
	overContext := func(how string, f conformance.Frame) {
		t.Helper()
		if f.Str("response", "status") != "failed" || f.Str("response", "error", "code") != chat.CodeContextLengthExceeded ||
			!strings.Contains(f.Str("response", "error", "message"), "context") {
			t.Fatalf("%s: status %s, error %v: want failed, %s", how, f.Str("response", "status"), f.Get("response", "error"), chat.CodeContextLengthExceeded)
		}
	}

	code, r := postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "input": long})
	if code != 200 {
		t.Fatalf("POST: %d %v", code, r)
	}
	overContext("JSON", conformance.Frame{"response": r})

	b, _ := json.Marshal(map[string]any{"model": llamatest.Model, "input": long, "stream": true})
	resp, err := http.Post(front+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var last conformance.Frame
	for sr := protocol.NewSSEReader(resp.Body); ; {
		_, data, err := sr.Next()
		if err != nil {
			break
		}
		last = nil
		_ = json.Unmarshal(data, &last)
	}
	resp.Body.Close()
	if last.Type() != "response.failed" {
		t.Fatalf("SSE ended with %v, want response.failed", last)
	}
	overContext("SSE", last)

	code, r = postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "input": "weather 0", "max_output_tokens": 16, "store": true})
	first := conformance.Frame{"response": r}
	if code != 200 || first.Str("response", "status") == "failed" {
		t.Fatalf("a short request after the refusals: %d %v", code, r)
	}
	code, r = postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "input": long,
		"previous_response_id": first.Str("response", "id")})
	if code != 200 {
		t.Fatalf("continuation: %d %v", code, r)
	}
	overContext("continuation", conformance.Frame{"response": r})
}

// TestEngineWrongPath puts Tether in front of llama-server with an -upstream that is not its
// API base: the engine's 404 "File Not Found" fails the response with server_error naming the
// URL asked and what -upstream must be, not as a model the engine lacks.
func TestEngineWrongPath(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 1})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.URL() + "/api"}, Slots: 1})
	_, front := servertest.Start(t, server.Options{Model: m})
	code, r := postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "input": "weather 0", "max_output_tokens": 16})
	f := conformance.Frame{"response": r}
	want := "has no Chat Completions API at POST " + eng.URL() + "/api/chat/completions (HTTP 404: File Not Found)"
	if code != 200 || f.Str("response", "status") != "failed" || f.Str("response", "error", "code") != "server_error" ||
		!strings.Contains(f.Str("response", "error", "message"), want) {
		t.Fatalf("POST: %d, status %s, error %v: want failed, server_error, %q", code, f.Str("response", "status"), f.Get("response", "error"), want)
	}
}

// TestEngineKeepAlive sends 80 streamed steps, 16 at a time, straight to a llama-server (which
// closes each connection after a streamed reply although it advertises keep-alive): none fails.
func TestEngineKeepAlive(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 4})
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 4})
	_, front := servertest.Start(t, server.Options{Model: m})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				code, r := postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model,
					"input": fmt.Sprintf("weather %d of rollout %d", i, w), "max_output_tokens": 16})
				if st := (conformance.Frame{"response": r}).Str("response", "status"); code != 200 || st == "failed" {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%d %v", code, r["error"]))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of 80 steps failed, the first: %v", len(failed), failed[0])
	}
}

// TestEngineTransports runs a conversation on each transport — HTTP with previous_response_id,
// the public WebSocket and the append WebSocket — through a real llama-server: every turn after
// the first is hot, and its cached_tokens are the engine's own cache_n for that step.
func TestEngineTransports(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 2, SlotContext: 4096})
	front, _, px := engineFront(t, chat.Options{Slots: 2}, eng)
	base := "ws" + strings.TrimPrefix(front, "http") + "/v1/responses"
	create := func(turn int, prev string) map[string]any {
		c := map[string]any{"model": llamatest.Model, "input": fmt.Sprintf("weather %d of rollout 5", turn), "max_output_tokens": 600}
		if prev != "" {
			c["previous_response_id"] = prev
		}
		return c
	}
	n := 0
	check := func(name string, turn int, usage conformance.Frame) {
		t.Helper()
		n++
		st := px[0].waitSteps(t, n)[n-1]
		if cached := usage.Num("input_tokens_details", "cached_tokens"); cached != st.cacheN || usage.Num("input_tokens") != st.prompt {
			t.Errorf("%s turn %d: usage %v, engine: %d prompt tokens, cache_n %d", name, turn, usage, st.prompt, st.cacheN)
		} else if turn > 0 && cached < st.prompt/2 {
			t.Errorf("%s turn %d: %d of %d prompt tokens cached on a continuation", name, turn, cached, st.prompt)
		}
	}

	prev := ""
	for turn := range 3 { // HTTP, stored, previous_response_id
		c := create(turn, prev)
		c["store"] = true
		code, r := postJSON(t, front+"/v1/responses", c)
		f := conformance.Frame{"response": r}
		if code != 200 || f.Str("response", "status") != "completed" {
			t.Fatalf("http turn %d: %d %v", turn, code, r)
		}
		check("http", turn, conformance.Frame(f.Obj("response", "usage")))
		prev = f.Str("response", "id")
	}

	h := http.Header{}
	h.Add("OpenAI-Beta", "responses_append=v1")
	for _, tr := range []struct {
		name, shape string
		header      http.Header
	}{{"ws", conformance.ShapePublic, nil}, {"append", conformance.ShapeAppend, h}} {
		c := wstest.Dial(t, base, tr.header)
		prev = ""
		for turn := range 3 {
			cr := create(turn, prev)
			cr["type"] = "response.create"
			c.Send(cr)
			fs := c.Until("response.completed", "response.incomplete", "response.failed")
			last := fs[len(fs)-1]
			if last.Type() != "response.completed" {
				t.Fatalf("%s turn %d: %v", tr.name, turn, last)
			}
			wstest.CheckGrammar(t, tr.shape, fs)
			check(tr.name, turn, conformance.Frame(last.Obj("response", "usage")))
			prev = last.Str("response", "id")
		}
	}
}

// TestEngineArgumentsNotJSON: a conversation holding a function_call whose arguments are not
// JSON (as a model writes them without strict mode; llama-server answers 500 to such a
// message) continues on a real llama-server: the arguments reach the engine as a JSON string
// holding the text, and the step completes.
func TestEngineArgumentsNotJSON(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{})
	front, _, px := engineFront(t, chat.Options{}, eng)
	const args = `{"location": "Par`
	code, r := postJSON(t, front+"/v1/responses", map[string]any{"model": llamatest.Model, "max_output_tokens": 16,
		"tools": []any{llamatest.Tool}, "input": []any{
			map[string]any{"role": "user", "content": "weather 0"},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": args},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "error: the arguments are not JSON"},
		}})
	f := conformance.Frame{"response": r}
	if code != 200 || f.Str("response", "status") == "failed" {
		t.Fatalf("POST: %d %v", code, r)
	}
	steps := px[0].waitSteps(t, 1)
	var call struct {
		ToolCalls []struct {
			Function struct{ Arguments string } `json:"function"`
		} `json:"tool_calls"`
	}
	if len(steps[0].request.Messages) < 2 || json.Unmarshal(steps[0].request.Messages[1], &call) != nil || len(call.ToolCalls) != 1 {
		t.Fatalf("the engine got %s", steps[0].request.Messages)
	}
	var sent string
	if err := json.Unmarshal([]byte(call.ToolCalls[0].Function.Arguments), &sent); err != nil || sent != args {
		t.Fatalf("arguments sent as %q, want a JSON string holding %q", call.ToolCalls[0].Function.Arguments, args)
	}
}
