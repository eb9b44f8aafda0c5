package clients_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/responses"
)

// TestCodexExecThroughResponsesChain runs a real Codex CLI turn against a Tether whose backend
// is an upstream Tether (sim) over WebSocket (sampler/responses): Codex's warm-up and its two
// chained creates reach the upstream as a warm-up and two hot continuations, and the answer
// is the upstream sim's.
func TestCodexExecThroughResponsesChain(t *testing.T) {
	_, up := servertest.Start(t, server.Options{})
	m, err := responses.New(responses.Options{URL: up + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{server: server.Options{Model: m}, logLevel: slog.LevelDebug})
	cx := newCodex(t, f, "gpt-5.5")
	const prompt = "Check the disk usage through the chain."
	run := cx.exec(t, prompt)
	run.checkTool(t, "tether-call-1")
	for _, want := range []string{prompt, `tool: "Chunk ID:`, "[ctx "} {
		if !strings.Contains(run.answer, want) {
			t.Errorf("answer does not contain %q: %q", want, run.answer)
		}
	}
	if p, u := f.posts.Load(), f.upgrades.Load(); p != 0 || u != 1 {
		t.Errorf("front saw %d POST /v1/responses and %d upgrades, want 0 and 1", p, u)
	}
	for path, want := range map[string]float64{"warmup": 1, "hot": 2, "cold": 0} {
		if got := upstreamMetric(t, up, `tether_continuations_total{path="`+path+`"}`); got != want {
			t.Errorf("upstream %s continuations %v, want %v", path, got, want)
		}
	}
}

// upstreamMetric returns the value of the sample named exactly name in base's /metrics.
func upstreamMetric(t *testing.T, base, name string) float64 {
	t.Helper()
	return servertest.Metric(t, base, name)
}
