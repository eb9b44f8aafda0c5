package clients_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/sim"
)

// TestCodexExecThroughChatChain runs a real Codex CLI turn against a Tether whose chat backend
// pins slots of a second Tether (sim) over POST /v1/chat/completions: Codex's tool call, its
// output and the answer cross both hops, and the hot continuation reports the upstream's
// cached tokens.
func TestCodexExecThroughChatChain(t *testing.T) {
	_, up := servertest.Start(t, server.Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant})})
	model, err := chat.New(chat.Options{BaseURLs: []string{up + "/v1"}, Slots: 2, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelDebug, server: server.Options{Model: model}})
	cx := newCodex(t, f, "gpt-5.5")
	const prompt = "Check the disk usage with a shell command."
	run := cx.exec(t, prompt)
	run.checkTool(t, "tether-call-1")
	for _, want := range []string{prompt, `tool: "Chunk ID:`, "[ctx "} {
		if !strings.Contains(run.answer, want) {
			t.Errorf("answer does not contain %q: %q", want, run.answer)
		}
	}
	if !strings.Contains(run.stdout, `"cached_input_tokens":`) || strings.Contains(run.stdout, `"cached_input_tokens":0`) {
		t.Errorf("codex did not see cached input tokens from the upstream:\n%s", run.stdout)
	}
}
