package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
)

// panicky is the sim, except that a rollout whose metadata has "test.panic" panics in its
// first sampling step: a backend with a bug.
type panicky struct{ *sim.Sim }

type panickySession struct {
	sampler.ModelSession
	panics bool
}

func (p panicky) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	ms, err := p.Sim.Open(ctx, info)
	return &panickySession{ModelSession: ms, panics: info.Settings.Metadata["test.panic"] != ""}, err
}

func (s *panickySession) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	if s.panics {
		_ = out.Text("about to fail")
		panic(errors.New("engine state corrupted: boom"))
	}
	return s.ModelSession.Sample(ctx, step, out)
}

func TestBackendPanicFailsOnlyItsRollout(t *testing.T) {
	_, url := testServer(t, Options{Model: panicky{sim.NewSim(sim.SimOptions{})}})
	c := dialAppend(t, url)
	c.Send(create("keep me", nil, shell))
	fs := c.Until("response.done")
	rid := fs[len(fs)-1].Str("response_id")
	call := pendingIDs(fs[len(fs)-1])[0]

	c.Send(create("crash", map[string]string{"test.panic": "1"}, shell))
	failed := c.Until("response.failed")
	last := failed[len(failed)-1]
	if last.Str("response", "error", "code") != protocol.CodeServerError || strings.Contains(last.Str("response", "error", "message"), "boom") {
		t.Fatalf("failed rollout: %v", last)
	}
	checkGrammar(t, failed)

	// The other rollout of the connection, and the server, keep working.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": call, "output": "ok"}}})
	done := c.Until("response.completed")
	if !strings.Contains(finalText(done[len(done)-1]), `tool: "ok"`) {
		t.Fatalf("the surviving rollout's answer: %q", finalText(done[len(done)-1]))
	}
	c2 := dialAppend(t, url)
	c2.Send(create("another connection", nil))
	c2.Until("response.completed")
}

func TestAdmissionGateBoundsSamplingAcrossConnections(t *testing.T) {
	_, url := testServer(t, Options{MaxSampling: 1, Model: sim.NewSim(sim.SimOptions{Speed: sim.Speed1000, Realtime: true})})
	a, b := dialAppend(t, url), dialAppend(t, url)
	a.Send(create("long answer", map[string]string{"sim.answer_tokens": "1500"}))
	a.Until("response.output_text.delta")
	b.Send(create("waits its turn", nil))
	metric := func() string {
		resp, err := http.Get(httpURL(url, "/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(metric(), "tether_sampling_waiting 1") {
		if time.Now().After(deadline) {
			t.Fatalf("B never waited for the admission gate:\n%s", metric())
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Until("response.completed")
	b.Until("response.completed")
	m := metric()
	if !strings.Contains(m, "tether_sampling_waiting 0") || !strings.Contains(m, "tether_sampling_admitted 0") || !strings.Contains(m, "tether_sampling_max 1") {
		t.Fatalf("gauges after both rollouts:\n%s", m)
	}
}
