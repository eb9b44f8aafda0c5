package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
)

// TestBenchAgainstLlamaServer runs the bench against a real llama-server with Tether (the chat
// backend, owning the engine's 4 slots) in front of it: the model is found through Tether's
// GET /v1/models, every transport (the engine driven directly, and Tether's four) runs every
// rollout to K+1 turns whether or not the model called the tool, and every turn carries the
// engine's own token counts, hot turns reusing the engine's cache.
func TestBenchAgainstLlamaServer(t *testing.T) {
	eng := llamatest.Start(t, llamatest.Options{Slots: 4})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	m, err := chat.New(chat.Options{BaseURLs: []string{eng.V1()}, Slots: 4, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})

	const rollouts, calls = 2, 3
	rep, err := Run(t.Context(), Config{URL: front, Engine: eng.V1(), Rollouts: rollouts, Calls: calls, WarmupCalls: 1,
		Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatalf("bench: %v\nllama-server log:\n%s", err, eng.Log())
	}
	var out bytes.Buffer
	rep.WriteTable(&out, false)
	t.Logf("\n%s", out.String())

	if rep.Mode != "engine" || rep.Workload.Model == "" || rep.Workload.Model == defaultModel || rep.Server.Engine != eng.V1() {
		t.Errorf("mode %q, model %q, engine %q: want engine mode with the engine's model", rep.Mode, rep.Workload.Model, rep.Server.Engine)
	}
	if rep.Workload.MaxOutputTokens != DefaultMaxOutputTokens || rep.Workload.ToolOutputBytes != DefaultEngineToolOutputBytes {
		t.Errorf("workload %+v: want the engine defaults", rep.Workload)
	}
	var names []string
	for _, tr := range rep.Transports {
		names = append(names, tr.Name)
	}
	if got := strings.Join(names, ","); got != "engine,http,http-prev,ws,append" {
		t.Fatalf("transports %s", got)
	}
	for _, tr := range rep.Transports {
		if tr.Turns != rollouts*(calls+1) {
			t.Errorf("%s: %d turns, want %d", tr.Name, tr.Turns, rollouts*(calls+1))
		}
		hot := 0
		for _, s := range tr.PerTurn {
			if s.InputTokens <= 0 || s.OutputTokens <= 0 || s.OutputTokens > DefaultMaxOutputTokens ||
				s.CachedTokens < 0 || s.CachedTokens > s.InputTokens || s.PrefillTokens != s.InputTokens-s.CachedTokens {
				t.Errorf("%s rollout %d turn %d: tokens in %d cached %d prefill %d out %d", tr.Name, s.Rollout, s.Turn,
					s.InputTokens, s.CachedTokens, s.PrefillTokens, s.OutputTokens)
			}
			if s.Turn > 1 && s.CachedTokens > 0 {
				hot++
			}
		}
		// Each later turn extends the same conversation: the engine reuses its prefix.
		if hot == 0 {
			t.Errorf("%s: no turn after the first reused the engine's cache", tr.Name)
		}
		if tr.TurnMS == nil || tr.TurnMS.P50 <= 0 || tr.RolloutS <= 0 || tr.InputTokensPerTurn <= 0 {
			t.Errorf("%s: no measured times or tokens: %+v", tr.Name, tr)
		}
	}
	for _, want := range []string{"engine prefill/cached", "append prefill/cached", "model " + rep.Workload.Model} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
}

// fakeEngine is a Chat Completions engine over a real socket for the engine-mode logic: the
// first turn of a conversation (one user message) is answered with a tool call, every other
// turn with text cut off at max tokens (finish_reason "length"), as a real model that stops
// calling does. Prompt tokens are the messages' bytes / 4; cached tokens the longest prefix
// shared with an earlier prompt, / 4.
type fakeEngine struct {
	mu      sync.Mutex
	prompts []string
	calls   int
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		http.NotFound(w, r)
		return
	}
	var req chatwire.Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		http.Error(w, "want a streamed request with usage", http.StatusBadRequest)
		return
	}
	maxTok := 0
	for _, p := range []*int{req.MaxCompletionTokens, req.MaxTokens} {
		if p != nil {
			maxTok = *p
		}
	}
	if maxTok <= 0 || req.Temperature == nil || *req.Temperature != 0 {
		http.Error(w, "want max tokens and temperature 0", http.StatusBadRequest)
		return
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		b, _ := json.Marshal(m)
		prompt.Write(b)
	}
	p := prompt.String()
	f.mu.Lock()
	cached := 0
	for _, q := range f.prompts {
		n := 0
		for n < len(p) && n < len(q) && p[n] == q[n] {
			n++
		}
		cached = max(cached, n/4)
	}
	f.prompts = append(f.prompts, p)
	f.calls++
	id := f.calls
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	out := maxTok
	if len(req.Messages) == 1 {
		out = 5
		send(chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", id),
			"type": "function", "function": map[string]any{"name": "exec_command", "arguments": ""}}}}, nil))
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"cmd":"ls"}`}}}}, nil))
		send(chunk(map[string]any{}, "tool_calls"))
	} else {
		for i := 0; i < maxTok; i++ {
			send(chunk(map[string]any{"content": "dream "}, nil))
		}
		send(chunk(map[string]any{}, "length"))
	}
	send(map[string]any{"object": "chat.completion.chunk", "choices": []any{}, "usage": map[string]any{
		"prompt_tokens": len(p) / 4, "completion_tokens": out, "total_tokens": len(p)/4 + out,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// TestBenchEngineMode runs the bench in engine mode against Tether's chat backend in front of
// fakeEngine, and the engine transport against fakeEngine itself: each rollout gets its K+1
// turns on every transport although the model calls the tool only at the first turn and every
// later turn ends incomplete at max_output_tokens (continued by a follow-up user message:
// previous_response_id, and on the append shape a new create once the rollout has ended); the
// token counts per turn are the engine's.
func TestBenchEngineMode(t *testing.T) {
	fe := &fakeEngine{}
	es := httptest.NewServer(fe)
	t.Cleanup(es.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	m, err := chat.New(chat.Options{BaseURLs: []string{es.URL + "/v1"}, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})

	const rollouts, calls, maxOut = 2, 3, 20
	rep, err := Run(t.Context(), Config{URL: front, Engine: es.URL + "/v1", Rollouts: rollouts, Calls: calls,
		MaxOutputTokens: maxOut, WarmupCalls: -1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteTable(&out, false)
	t.Logf("\n%s", out.String())
	if rep.Mode != "engine" || rep.Workload.Model != "fake-model" || rep.Workload.Turns != calls+1 {
		t.Fatalf("mode %q model %q turns %d", rep.Mode, rep.Workload.Model, rep.Workload.Turns)
	}
	if len(rep.Transports) != 5 || rep.Transports[0].Name != Engine {
		t.Fatalf("%d transports, the first %q", len(rep.Transports), rep.Transports[0].Name)
	}
	for _, tr := range rep.Transports {
		if tr.Turns != rollouts*(calls+1) || tr.ToolCallTurns != rollouts {
			t.Errorf("%s: %d turns (%d with calls), want %d (%d)", tr.Name, tr.Turns, tr.ToolCallTurns, rollouts*(calls+1), rollouts)
		}
		for _, s := range tr.PerTurn {
			wantOut, wantCalls := maxOut, 0
			if s.Turn == 1 {
				wantOut, wantCalls = 5, 1
			}
			if s.OutputTokens != wantOut || s.ToolCalls != wantCalls || s.InputTokens <= 0 ||
				s.PrefillTokens != s.InputTokens-s.CachedTokens || s.CachedTokens < 0 {
				t.Errorf("%s rollout %d turn %d: %+v", tr.Name, s.Rollout, s.Turn, s)
			}
			// Every later turn extends the conversation the engine saw the turn before.
			if s.Turn > 1 && s.CachedTokens == 0 {
				t.Errorf("%s rollout %d turn %d: nothing cached", tr.Name, s.Rollout, s.Turn)
			}
		}
		if tr.CachedFraction <= 0 || tr.RolloutS <= 0 {
			t.Errorf("%s: cached fraction %v, rollout %vs", tr.Name, tr.CachedFraction, tr.RolloutS)
		}
	}
	fe.mu.Lock()
	n := fe.calls
	fe.mu.Unlock()
	if n != 5*rollouts*(calls+1) {
		t.Errorf("the engine served %d requests, want %d", n, 5*rollouts*(calls+1))
	}
}
