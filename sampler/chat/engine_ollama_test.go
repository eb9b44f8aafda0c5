package chat_test

import (
	"strings"
	"testing"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/ollamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
)

// ollamaFront starts Tether with the chat backend in front of a real Ollama (behind an
// engineProxy, which reads Ollama's usage off the wire): Slots 0, since Ollama exposes no slots, and max_tokens sent as well, since
// Ollama's /v1 reads only that.
func ollamaFront(t *testing.T, eng *ollamatest.Server) (string, *engineProxy) {
	t.Helper()
	p, u := newEngineProxy(t, eng.URL())
	m := newModel(t, chat.Options{BaseURLs: []string{u + "/v1"}, LegacyMaxTokens: true})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})
	return front, p
}

// checkOllamaUsage checks a Response's usage against what Ollama reported for the step: the
// same token counts, and cached_tokens 0 because Ollama reports none (it reuses its cache,
// but its usage has no prompt_tokens_details).
func checkOllamaUsage(t *testing.T, name string, usage conformance.Frame, step engineStep) {
	eng := step.usage
	t.Helper()
	if eng.PromptTokensDetails != nil && eng.PromptTokensDetails.CachedTokens != 0 {
		t.Logf("%s: Ollama now reports %d cached tokens: update docs/engines.md", name, eng.PromptTokensDetails.CachedTokens)
	}
	if usage.Num("input_tokens") != eng.PromptTokens || usage.Num("output_tokens") != eng.CompletionTokens || eng.PromptTokens <= 0 {
		t.Errorf("%s: usage %v, Ollama reported %+v", name, usage, eng)
	}
	if cached := usage.Num("input_tokens_details", "cached_tokens"); eng.PromptTokensDetails == nil && cached != 0 {
		t.Errorf("%s: cached_tokens %v, but Ollama reported none", name, cached)
	}
}

// TestOllamaResponses serves POST /v1/responses as JSON and as SSE from a real Ollama: both
// end completed (or incomplete at max_output_tokens) with Ollama's token counts, and
// cached_tokens is 0.
func TestOllamaResponses(t *testing.T) {
	eng := ollamatest.Start(t, ollamatest.Options{})
	front, px := ollamaFront(t, eng)
	create := map[string]any{"model": ollamatest.Model, "input": "weather 0 of rollout 1", "max_output_tokens": 200}

	code, r := postJSON(t, front+"/v1/responses", create)
	f := conformance.Frame{"response": r}
	if st := f.Str("response", "status"); code != 200 || (st != "completed" && st != "incomplete") {
		t.Fatalf("POST: %d %v", code, r)
	}
	checkOllamaUsage(t, "json", conformance.Frame(f.Obj("response", "usage")), px.waitSteps(t, 1)[0])

	create["stream"] = true
	events := postSSE(t, front, create)
	last := events[len(events)-1]
	deltas := 0
	for _, ev := range events {
		if ev.Type() == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("%d text deltas: want the answer streamed", deltas)
	}
	checkOllamaUsage(t, "sse", conformance.Frame(last.Obj("response", "usage")), px.waitSteps(t, 2)[1])
}

// TestOllamaWebSocket runs a two-turn conversation on the public WebSocket through a real
// Ollama, the second turn chained with previous_response_id: Ollama is sent the first turn
// again (its prompt is longer than the first turn's prompt and answer), and cached_tokens is 0
// on both turns although Ollama reuses its cache.
func TestOllamaWebSocket(t *testing.T) {
	eng := ollamatest.Start(t, ollamatest.Options{})
	front, px := ollamaFront(t, eng)
	ws := wstest.Dial(t, "ws"+strings.TrimPrefix(front, "http")+"/v1/responses", nil)
	prev := ""
	var usages []conformance.Frame
	for turn := range 2 {
		c := map[string]any{"type": "response.create", "model": ollamatest.Model, "input": "weather of rollout 5", "max_output_tokens": 100}
		if prev != "" {
			c["previous_response_id"] = prev
		}
		ws.Send(c)
		fs := ws.Until("response.completed", "response.incomplete", "response.failed")
		last := fs[len(fs)-1]
		if last.Type() == "response.failed" {
			t.Fatalf("turn %d: %v", turn, last)
		}
		wstest.CheckGrammar(t, conformance.ShapePublic, fs)
		u := conformance.Frame(last.Obj("response", "usage"))
		checkOllamaUsage(t, "ws", u, px.waitSteps(t, turn+1)[turn])
		usages = append(usages, u)
		prev = last.Str("response", "id")
		if prev == "" {
			t.Fatalf("turn %d: no response id in %v", turn, last)
		}
	}
	if first, second := usages[0], usages[1]; second.Num("input_tokens") <= first.Num("input_tokens")+first.Num("output_tokens") {
		t.Errorf("turn 2 prompt %v tokens, turn 1 was %v + %v: the chained turn did not carry the first",
			second.Num("input_tokens"), first.Num("input_tokens"), first.Num("output_tokens"))
	}
}
