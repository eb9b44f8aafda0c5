package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// TestAppendLanes: the append shape takes stream_id on its create; every event of the lane's
// rollout carries it (response.done too, and the events after a response.append, which names
// no lane); a slow lane does not hold up another; the default lane carries none.
func TestAppendLanes(t *testing.T) {
	_, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})})
	c := dialAppend(t, url)
	slow := create("slow task", map[string]string{"sim.speed": "65", "sim.answer_tokens": "120"})
	slow["stream_id"] = "slow"
	tool := create("tool task", map[string]string{"sim.calls": "1"}, shell)
	tool["stream_id"] = "tools"
	c.Send(slow)
	c.Send(tool)
	var done wstest.Frame
	byLane := map[string][]wstest.Frame{}
	for done == nil {
		f := c.Next()
		byLane[f.Str("stream_id")] = append(byLane[f.Str("stream_id")], f)
		if f.Type() == "response.done" {
			done = f
		}
		if f.Type() == "response.completed" {
			t.Fatalf("a response completed before the tool lane suspended: %v", f)
		}
	}
	if done.Str("stream_id") != "tools" {
		t.Fatalf("response.done without its lane: %v", done)
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(done)[0], "output": "ok"}}})
	var order []string
	for len(order) < 2 {
		f := c.Next()
		l := f.Str("stream_id")
		if l == "" {
			t.Fatalf("event without its lane: %v", f)
		}
		byLane[l] = append(byLane[l], f)
		if f.Type() == "response.completed" {
			order = append(order, l)
		}
	}
	if strings.Join(order, ",") != "tools,slow" {
		t.Fatalf("completion order %v: the slow lane held the tool lane back", order)
	}
	for l, fs := range byLane {
		if l != "" {
			checkGrammar(t, fs)
		}
	}
	r := rollout(t, c, create("default lane", nil), nil)
	for _, f := range r {
		if _, has := f["stream_id"]; has {
			t.Fatalf("default-lane event with a stream_id: %v", f)
		}
	}
}

// TestWriteTimeoutWhileAnotherLaneIsQuiet: a client stops reading while one lane streams and
// another lane's rollout is quiet in its model (a long prefill, past the keepalive interval):
// the server still drops it for -write-timeout, although the quiet lane's keepalive cannot be
// written. Pings are off, so only the write timeout can drop it.
func TestWriteTimeoutWhileAnotherLaneIsQuiet(t *testing.T) {
	var mu sync.Mutex
	var drops []string // the reasons of the "dropping peer" lines
	log := slog.New(recordHandler(func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool {
			if r.Message == "dropping peer" && a.Key == "reason" {
				mu.Lock()
				drops = append(drops, a.Value.String())
				mu.Unlock()
			}
			return true
		})
	}))
	_, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{Realtime: true}), Logger: log,
		Limits: session.Limits{WriteTimeout: time.Second, KeepAlive: 200 * time.Millisecond}})
	p := dialRawWS(t, url, http.Header{"OpenAI-Beta": {AppendBeta}})
	// About 40,000 tokens to prefill at the 65 preset's 3,000 tokens/s: 13 s without a sink
	// call after its response.in_progress.
	quiet := create(strings.Repeat("word ", 40000), map[string]string{"sim.speed": "65", "sim.answer_tokens": "10"})
	quiet["stream_id"] = "quiet"
	p.send(quiet)
	p.send(create("stream", map[string]string{"sim.answer_tokens": "1000000"}))
	for quietStarted, streaming := false, false; !quietStarted || !streaming; {
		op, data := p.next()
		if op != opText {
			continue
		}
		var f struct {
			Type     string `json:"type"`
			StreamID string `json:"stream_id"`
		}
		_ = json.Unmarshal(data, &f)
		quietStarted = quietStarted || f.Type == "response.in_progress" && f.StreamID == "quiet"
		streaming = streaming || f.Type == "response.output_text.delta" && f.StreamID == ""
	}
	// The client reads no more: the default lane fills the socket buffers and its write
	// blocks, while the quiet lane's keepalive waits behind it.
	start := time.Now()
	waitDeadline(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(drops) > 0
	}, "the peer that stopped reading dropped (-write-timeout 1s)")
	t.Logf("dropped %v after the client stopped reading", time.Since(start))
	mu.Lock()
	defer mu.Unlock()
	if len(drops) != 1 || !strings.Contains(drops[0], "write timeout") {
		t.Fatalf("drops %q, want one for the write timeout", drops)
	}
}

// waitDeadline polls cond until it holds, failing the test with what after d.
func waitDeadline(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > d {
			t.Fatalf("waited %v for %s", d, what)
		}
	}
}
