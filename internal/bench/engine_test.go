package bench

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/backend/chat"
	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
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
