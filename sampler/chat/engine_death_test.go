package chat_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
)

// killProxy sits in front of a real llama-server. Armed, it forwards the first chat completion
// until the engine's first SSE data line has reached Tether, says so on held, and waits on
// release (the test kills the engine meanwhile, kill -9) before it breaks the connection, as
// the engine's death mid-answer does. Everything else, and every request once disarmed, goes
// through unchanged (a dead engine's requests get 502 from it).
type killProxy struct {
	target string
	next   *httputil.ReverseProxy
	armed  atomic.Bool
	held   chan struct{} // gets a value when the armed step's first data line reached Tether
	resume chan struct{} // the armed step breaks off when this gets a value
	chats  atomic.Int64  // chat completions received
}

func newKillProxy(t *testing.T, engine *llamatest.Server) (*killProxy, string) {
	u, err := url.Parse(engine.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &killProxy{target: engine.URL(), next: httputil.NewSingleHostReverseProxy(u),
		held: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
	p.next.FlushInterval = -1
	p.next.Transport = &http.Transport{DisableKeepAlives: true}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, hs.URL
}

func (p *killProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	chat := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions")
	if chat {
		p.chats.Add(1)
	}
	if !chat || !p.armed.CompareAndSwap(true, false) {
		p.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	req.Header = r.Header.Clone()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		_, _ = io.WriteString(w, line)
		if strings.HasPrefix(line, "data: ") || err != nil {
			break
		}
	}
	w.(http.Flusher).Flush()
	p.held <- struct{}{}
	<-p.resume
	panic(http.ErrAbortHandler)
}

// breakStep creates a response (body req) whose step kp breaks off after the engine's first
// data line; kill runs meanwhile, while the step's stream is open. It returns the response.
func (kp *killProxy) breakStep(t *testing.T, front, req string, kill func()) faultResult {
	t.Helper()
	kp.armed.Store(true)
	done := make(chan faultResult, 1)
	go func() {
		resp, err := http.Post(front+"/v1/responses", "application/json", strings.NewReader(req))
		var r faultResult
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
		}
		done <- r
	}()
	select {
	case <-kp.held:
	case r := <-done:
		kp.armed.Store(false)
		t.Fatalf("the step never reached the armed replica: %s %+v", r.Status, r.Error)
	}
	kill()
	kp.resume <- struct{}{}
	return <-done
}

// replicaMetric returns the model's metric name (a gauge or a counter) for one replica.
func replicaMetric(t *testing.T, m *chat.Model, name, replica string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == "replica" && l.GetValue() == replica {
					sum += mm.GetGauge().GetValue() + mm.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestEngineReplicaDiesMidStep kills a llama-server replica (kill -9) while it streams a step:
// that step fails, and the replica is out of placement (tether_upstream_up 0) as soon as the
// failure is answered, not when a later request to it is refused: the next rollouts all run
// (completed, or incomplete at their max_output_tokens) on the other replica, and none is sent
// to the dead one. Restarted, it comes back through the health probe and serves rollouts again.
func TestEngineReplicaDiesMidStep(t *testing.T) {
	engines := replicas(t, 2)
	kp, dying := newKillProxy(t, engines[0])
	m := newModel(t, chat.Options{Slots: 4, BaseURLs: []string{dying + "/v1", engines[1].V1()}})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})
	const req = `{"model":"aidreams","input":"weather a","max_output_tokens":64,"store":false}`

	// The first rollout is placed on the first replica: both are idle.
	r := kp.breakStep(t, front, req, engines[0].Stop) // kill -9, and wait until the process is gone
	if r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "broke off") {
		t.Fatalf("the step on the killed replica: %s %+v, want failed, its stream broken off", r.Status, r.Error)
	}
	if up := replicaMetric(t, m, "tether_upstream_up", dying); up != 0 {
		t.Fatalf("tether_upstream_up of the killed replica = %v right after its step failed, want 0", up)
	}
	if up := replicaMetric(t, m, "tether_upstream_up", engines[1].URL()); up != 1 {
		t.Fatalf("tether_upstream_up of the live replica = %v, want 1", up)
	}
	for i := range 3 {
		if r := create(t, front, req); r.Status == "failed" {
			t.Fatalf("rollout %d after the kill: %s %+v", i, r.Status, r.Error)
		}
	}
	if n := kp.chats.Load(); n != 1 {
		t.Errorf("%d chat completions reached the killed replica, want only the one it died in", n)
	}
	if n := replicaMetric(t, m, "tether_upstream_steps_total", engines[1].URL()); n != 3 {
		t.Errorf("%v steps on the live replica, want the 3 rollouts after the kill", n)
	}

	engines[0].Restart()
	deadline := time.Now().Add(60 * time.Second)
	for kp.chats.Load() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted replica took no rollout within 60 s")
		}
		if r := create(t, front, req); r.Status == "failed" {
			t.Fatalf("rollout after the restart: %s %+v", r.Status, r.Error)
		}
	}
	if up := replicaMetric(t, m, "tether_upstream_up", dying); up != 1 {
		t.Errorf("tether_upstream_up of the restarted replica = %v after it served a rollout, want 1", up)
	}
}

// TestEngineReplicaRestartedFewerSlots restarts a llama-server replica with fewer slots (-np 4,
// then -np 2) while it streams a step, quickly enough that it answers /health again when
// Tether asks after the broken stream: it stays in placement, but its slot count is read again
// before its next step, which it does not take (two rollouts could share a slot there). That
// rollout runs on the other replica, and the restarted one is out of placement.
func TestEngineReplicaRestartedFewerSlots(t *testing.T) {
	engines := replicas(t, 2)
	kp, restarted := newKillProxy(t, engines[0])
	m := newModel(t, chat.Options{Slots: 4, BaseURLs: []string{restarted + "/v1", engines[1].V1()}})
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})
	const req = `{"model":"aidreams","input":"weather a","max_output_tokens":64,"store":false}`

	r := kp.breakStep(t, front, req, func() {
		engines[0].Stop()
		engines[0].SetSlots(2)
		engines[0].Restart() // returns once /health answers 200
	})
	if r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "broke off") {
		t.Fatalf("the step on the restarted replica: %s %+v, want failed, its stream broken off", r.Status, r.Error)
	}
	if up := replicaMetric(t, m, "tether_upstream_up", restarted); up != 1 {
		t.Fatalf("tether_upstream_up of the restarted replica = %v, want 1: it answered /health", up)
	}
	// Both replicas are idle: the next rollout is placed on the restarted one first.
	if r := create(t, front, req); r.Status == "failed" {
		t.Fatalf("the rollout after the restart: %s %+v", r.Status, r.Error)
	}
	if n := kp.chats.Load(); n != 1 {
		t.Errorf("%d chat completions reached the replica restarted with 2 slots, want only the broken one", n)
	}
	if up := replicaMetric(t, m, "tether_upstream_up", restarted); up != 0 {
		t.Errorf("tether_upstream_up of the replica restarted with 2 slots = %v, want 0", up)
	}
	if n := replicaMetric(t, m, "tether_upstream_steps_total", engines[1].URL()); n != 1 {
		t.Errorf("%v steps on the other replica, want the rollout after the restart", n)
	}
}
