package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// headKey sends the headers of a POST /v1/responses with key and Content-Length n, and the
// body's first bytes.
func (c *rawConn) headKey(key string, n int, first string) {
	c.send(fmt.Sprintf("POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", key, n, first))
}

// Key B's stalled bodies take no more than its share of the decoding slots: B's third is
// refused at once while slots are free, and key A's POSTs go through.
func TestKeyShareOfDecodingSlots(t *testing.T) {
	s, addr := realServer(t, Options{Keys: NewKeys("key-a", "key-b"), MaxDecoding: 4})
	url := "ws://" + addr + "/v1/responses"
	for i := range 2 {
		c := dialRaw(t, addr)
		c.headKey("key-b", 1000, `{"model":"sim",`)
		waitFor(t, func() bool { return s.Budget().InUse() >= int64(i+1)*4000 })
	}
	over := dialRaw(t, addr)
	over.headKey("key-b", 1000, `{"model":"sim",`)
	if code, body := over.response(); code != 503 || !strings.Contains(body, "server_overloaded") || !strings.Contains(body, "share") {
		t.Fatalf("B's POST over its share: %d %s", code, body)
	}
	for i := range 3 {
		if code, r := post(t, url, "key-a", map[string]any{"model": "sim", "input": fmt.Sprint("more ", i)}); code != 200 {
			t.Fatalf("A's POST while B holds its share: %d %v", code, r)
		}
	}
}

// Key B's bodies being decoded take no more than its share of the memory budget; key A's
// POST still fits.
func TestKeyShareOfMemoryBudget(t *testing.T) {
	s, addr := realServer(t, Options{Keys: NewKeys("key-a", "key-b"), Limits: session.Limits{MaxFrame: 1 << 20}, MaxMemory: 8 << 20, MaxDecoding: -1})
	url := "ws://" + addr + "/v1/responses"
	// 4 × 900 KiB of B's 4 MiB share.
	held := dialRaw(t, addr)
	held.headKey("key-b", 900<<10, `{"model":"sim","input":"`)
	waitFor(t, func() bool { return s.Budget().InUse() >= 4*900<<10 })
	over := dialRaw(t, addr)
	over.headKey("key-b", 900<<10, `{"model":"sim","input":"`)
	if code, body := over.response(); code != 503 || !strings.Contains(body, "server_overloaded") {
		t.Fatalf("B's POST over its share of the budget: %d %s", code, body)
	}
	if code, r := post(t, url, "key-a", map[string]any{"model": "sim", "input": strings.Repeat("a", 800<<10)}); code != 200 {
		t.Fatalf("A's 800 KiB POST while B holds its share: %d %v", code, r)
	}
}

// gateModel is the sim whose steps wait, per user text, until that text's gate is closed;
// entered receives each text as its step begins.
type gateModel struct {
	sampler.Model
	mu      sync.Mutex
	gates   map[string]chan struct{}
	entered chan string
}

func (m *gateModel) gate(text string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gates[text] == nil {
		m.gates[text] = make(chan struct{})
	}
	return m.gates[text]
}

func (m *gateModel) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	ms, err := m.Model.Open(ctx, info)
	return gateSession{ms, m}, err
}

type gateSession struct {
	sampler.ModelSession
	m *gateModel
}

func (g gateSession) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	text := ""
	for _, it := range step.Context {
		if it.Type == protocol.ItemMessage && it.Role == "user" {
			text = it.Text()
		}
	}
	g.m.entered <- text
	select {
	case <-g.m.gate(text):
	case <-ctx.Done():
		return sampler.StepResult{}, ctx.Err()
	}
	return g.ModelSession.Sample(ctx, step, out)
}

// chat sends one chat completion with key and returns its status (0 and the error when the
// request failed).
func chat(url, key, text string) (int, error) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
		strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"`+text+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Key B holds both chat slots and three more of its requests wait; key A arrives: the first
// slot B releases goes to A, not to one of B's waiting requests (B is at its share of one while A waits), and A's completion
// ends.
func TestKeyShareOfChatSlots(t *testing.T) {
	m := &gateModel{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant}), gates: map[string]chan struct{}{}, entered: make(chan string, 8)}
	s, addr := realServer(t, Options{Keys: NewKeys("key-a", "key-b"), Model: m, Slots: 2})
	url := "http://" + addr
	type result struct {
		text string
		code int
		err  error
	}
	results := make(chan result, 6)
	send := func(key, text string) {
		go func() {
			code, err := chat(url, key, text)
			results <- result{text, code, err}
		}()
	}
	send("key-b", "b1")
	send("key-b", "b2")
	for range 2 {
		<-m.entered
	}
	for _, b := range []string{"b3", "b4", "b5"} {
		send("key-b", b)
	}
	waitFor(t, func() bool { return s.chat.Slots.Waiting() == 3 })
	send("key-a", "a1")
	waitFor(t, func() bool { return s.chat.Slots.Waiting() == 4 })
	close(m.gate("b1"))
	if r := <-results; r.text != "b1" || r.code != 200 {
		t.Fatalf("b1: %+v", r)
	}
	if got := <-m.entered; got != "a1" {
		t.Fatalf("the slot B released went to %q, not A", got)
	}
	close(m.gate("a1"))
	if r := <-results; r.text != "a1" || r.code != 200 {
		t.Fatalf("A's completion: %+v", r)
	}
	for _, b := range []string{"b2", "b3", "b4", "b5"} {
		close(m.gate(b))
	}
	for range 4 {
		if r := <-results; r.code != 200 {
			t.Fatalf("B's completion: %+v", r)
		}
	}
}
