package chat_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// TestChainConforms runs the conformance suite, both shapes, -model-contract any, against a
// front Tether whose chat backend pins slots of a sim Tether upstream.
func TestChainConforms(t *testing.T) {
	_, up := servertest.Start(t, server.Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true})})
	const maxFrame = 64 << 10
	_, front := servertest.Start(t, server.Options{
		Limits: session.Limits{MaxFrame: maxFrame},
		Model:  newModel(t, chat.Options{BaseURLs: []string{up + "/v1"}, Slots: 4, Timeout: 10 * time.Second}),
	})
	var out bytes.Buffer
	rep := conformance.Run(t.Context(), conformance.Config{URL: front + "/v1", Shape: conformance.ShapeBoth,
		Contract: conformance.ContractAny, MaxFrame: maxFrame, Timeout: 10 * time.Second}, &out)
	t.Logf("chain:\n%s", out.String())
	if rep.Failed != 0 || rep.Passed == 0 {
		t.Fatalf("%d scenarios failed against the chat chain:\n%s", rep.Failed, out.String())
	}
}

// TestEngineConforms runs the conformance suite, both shapes, -model-contract any, against
// Tether's chat backend in front of a real llama-server: no scenario fails; a scenario the model
// cannot perform (it made no tool call) is a named skip.
func TestEngineConforms(t *testing.T) {
	if testing.Short() {
		t.Skip("engine conformance: skipped with -short")
	}
	eng := llamatest.Start(t, llamatest.Options{Slots: 4})
	const maxFrame = 64 << 10
	m := newModel(t, chat.Options{BaseURLs: []string{eng.V1()}, Slots: 4, Timeout: time.Minute})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Limits: session.Limits{MaxFrame: maxFrame}, Model: m})
	var out bytes.Buffer
	rep := conformance.Run(t.Context(), conformance.Config{URL: front + "/v1", Shape: conformance.ShapeBoth,
		Contract: conformance.ContractAny, MaxFrame: maxFrame, Timeout: 2 * time.Minute, Model: llamatest.Model}, &out)
	t.Logf("llama-server:\n%s", out.String())
	if rep.Failed != 0 || rep.Passed == 0 {
		t.Fatalf("%d scenarios failed against llama-server:\n%s", rep.Failed, out.String())
	}
}
