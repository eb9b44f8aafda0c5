package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// The routes that sample: a chat completion and a public-shape create, each with one user text.
var samplingRoutes = []struct {
	path string
	body func(text string) string
}{
	{"/v1/chat/completions", func(text string) string {
		return `{"model":"sim","messages":[{"role":"user","content":"` + text + `"}]}`
	}},
	{"/v1/responses", func(text string) string { return `{"model":"sim","input":"` + text + `"}` }},
}

// newGateModel is a gateModel over the instant sim.
func newGateModel() *gateModel {
	return &gateModel{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant}), gates: map[string]chan struct{}{}, entered: make(chan string, 64)}
}

// postAsync sends body to path with key and delivers the status on the returned channel.
func postAsync(t *testing.T, base, path, key, body string) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// sameError checks that both routes answered the same status and error object.
func sameError(t *testing.T, what string, codes [2]int, bodies [2]map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	for i, r := range samplingRoutes {
		if codes[i] != wantStatus || errCode(bodies[i]) != wantCode {
			t.Fatalf("%s: %s answered %d %v, want %d %s", what, r.path, codes[i], bodies[i], wantStatus, wantCode)
		}
	}
	if a, b := fmt.Sprint(bodies[0]), fmt.Sprint(bodies[1]); a != b {
		t.Fatalf("%s: the routes' error envelopes differ:\n%s\n%s", what, a, b)
	}
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// A step of either route holding the one -max-sampling admission makes the other route's
// requests wait for it (tether_sampling_waiting), and they run once it ends.
func TestChatCompletionWaitsForMaxSamplingLikeResponses(t *testing.T) {
	m := newGateModel()
	s, addr := realServer(t, Options{MaxSampling: 1, Model: m})
	base := "http://" + addr
	close(m.gate("go"))
	for i, holder := range samplingRoutes {
		hold := fmt.Sprintf("hold%d", i)
		held := postAsync(t, base, holder.path, "", holder.body(hold))
		if got := <-m.entered; got != hold {
			t.Fatalf("first step entered: %q", got)
		}
		var waiting []<-chan int
		for _, r := range samplingRoutes {
			waiting = append(waiting, postAsync(t, base, r.path, "", r.body("go")))
		}
		waitFor(t, func() bool { return s.adm.Waiting.Load() == 2 })
		for j, w := range waiting {
			select {
			case code := <-w:
				t.Fatalf("%s ran past -max-sampling 1 while %s sampled: %d", samplingRoutes[j].path, holder.path, code)
			default:
			}
		}
		close(m.gate(hold))
		if code := <-held; code != 200 {
			t.Fatalf("%s holding the admission: %d", holder.path, code)
		}
		for j, w := range waiting {
			if code := <-w; code != 200 {
				t.Fatalf("%s after the admission was released: %d", samplingRoutes[j].path, code)
			}
		}
		for range 2 {
			<-m.entered
		}
	}
}

// A key whose running request of either route is its one live rollout (-key-rollouts 1) gets
// the same 429 quota_exceeded envelope on both routes; another key's requests run.
func TestChatCompletionKeyQuotaLikeResponses(t *testing.T) {
	m := newGateModel()
	_, addr := realServer(t, Options{Keys: NewKeys("key-a", "key-b"), KeyRollouts: 1, Model: m})
	base := "http://" + addr
	close(m.gate("go"))
	for i, holder := range samplingRoutes {
		hold := fmt.Sprintf("hold%d", i)
		held := postAsync(t, base, holder.path, "key-b", holder.body(hold))
		if got := <-m.entered; got != hold {
			t.Fatalf("first step entered: %q", got)
		}
		var codes [2]int
		var bodies [2]map[string]any
		for j, r := range samplingRoutes {
			codes[j], bodies[j] = do(t, "POST", base+r.path, "key-b", r.body("go"))
		}
		sameError(t, "key B past its quota while its "+holder.path+" runs", codes, bodies, 429, "quota_exceeded")
		for _, r := range samplingRoutes {
			if code, body := do(t, "POST", base+r.path, "key-a", r.body("go")); code != 200 {
				t.Fatalf("key A's %s: %d %v", r.path, code, body)
			}
			<-m.entered
		}
		close(m.gate(hold))
		if code := <-held; code != 200 {
			t.Fatalf("key B's %s: %d", holder.path, code)
		}
	}
}

// A body in progress on either route holds the memory budget: both routes get the same 503
// server_overloaded envelope until it is gone.
func TestChatCompletionMemoryBudgetLikeResponses(t *testing.T) {
	s, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, MaxMemory: 4 << 20})
	base := "http://" + addr
	for _, holder := range samplingRoutes {
		c := dialRaw(t, addr)
		c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", holder.path, 1<<20))
		c.send(`{"model":"sim",`)
		waitFor(t, func() bool { return s.Budget().InUse() >= 4<<20 })
		var codes [2]int
		var bodies [2]map[string]any
		for j, r := range samplingRoutes {
			codes[j], bodies[j] = do(t, "POST", base+r.path, "", r.body("hi"))
		}
		sameError(t, "while a "+holder.path+" body holds the budget", codes, bodies, 503, "server_overloaded")
		_ = c.Close()
		waitFor(t, func() bool { return s.Budget().InUse() == 0 })
	}
}

// The items a chat slot keeps are counted in the memory budget, as a rollout's are, until the
// slot is freed.
func TestChatSlotItemsCountedInBudget(t *testing.T) {
	s, addr := realServer(t, Options{Slots: 1})
	base := "http://" + addr
	if code, body := do(t, "POST", base+"/v1/chat/completions", "", samplingRoutes[0].body(strings.Repeat("x", 10<<10))); code != 200 {
		t.Fatalf("chat: %d %v", code, body)
	}
	// Once the request's own reservation is gone, what the budget holds is the slot's items.
	var kept int64
	waitFor(t, func() bool {
		info := s.chat.Slots.Info()
		kept = info[0].Bytes
		return info[0].Items == 2 && kept > 10<<10 && s.Budget().InUse() == kept
	})
	s.BeginShutdown() // frees the idle slots
	waitFor(t, func() bool { return s.Budget().InUse() == 0 && s.chat.Slots.Info()[0].Bytes == 0 })
}

// closePanics is the sim, except that closing a session panics: a backend with a bug.
type closePanics struct{ *sim.Sim }

type closePanicsSession struct{ sampler.ModelSession }

func (m closePanics) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	ms, err := m.Sim.Open(ctx, info)
	return closePanicsSession{ms}, err
}

func (s closePanicsSession) Close() {
	s.ModelSession.Close()
	panic(errors.New("engine handle freed twice"))
}

// A chat slot's session that panics when it is closed is logged with its value and stack;
// the request that replaced it is answered.
func TestChatSlotClosePanicLoggedWithStack(t *testing.T) {
	var log syncBuffer
	_, addr := realServer(t, Options{Slots: 1, Model: closePanics{sim.NewSim(sim.SimOptions{})}, Logger: jsonLogger(&log)})
	base := "http://" + addr
	for i := range 2 { // the second request (cache_prompt false) closes the first's session
		body := fmt.Sprintf(`{"model":"sim","cache_prompt":false,"messages":[{"role":"user","content":"turn %d"}]}`, i)
		if code, m := do(t, "POST", base+"/v1/chat/completions", "", body); code != 200 {
			t.Fatalf("chat %d: %d %v", i, code, m)
		}
	}
	var found bool
	for _, line := range strings.Split(log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "chat completion: the model backend panicked" {
			continue
		}
		stack, _ := rec["stack"].(string)
		if rec["panic"] != "engine handle freed twice" || !strings.Contains(stack, "goroutine") || !strings.Contains(stack, "closePanicsSession") {
			t.Fatalf("panic log: %v", rec)
		}
		found = true
	}
	if !found {
		t.Fatalf("no panic logged:\n%s", log.String())
	}
}
