package chat_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
)

// roundRobin is a plain load balancer: each request goes to the next replica.
type roundRobin struct {
	next  []*httputil.ReverseProxy
	count atomic.Int64
}

func newRoundRobin(t *testing.T, engines []*llamatest.Server) string {
	rr := &roundRobin{}
	for _, e := range engines {
		u, _ := url.Parse(e.URL())
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1
		p.Transport = &http.Transport{DisableKeepAlives: true}
		rr.next = append(rr.next, p)
	}
	hs := httptest.NewServer(rr)
	t.Cleanup(hs.Close)
	return hs.URL
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rr.next[int(rr.count.Add(1))%len(rr.next)].ServeHTTP(w, r)
}

// replicas starts n llama-servers of 4 slots sharing one slot save directory.
func replicas(t *testing.T, n int) []*llamatest.Server {
	dir := t.TempDir()
	var engines []*llamatest.Server
	for range n {
		engines = append(engines, llamatest.Start(t, llamatest.Options{Slots: 4, SlotContext: 4096, NoCacheRAM: true, SlotSave: true, SlotDir: dir}))
	}
	return engines
}

// TestEngineReplicas runs 24 concurrent conversations of 6 hot turns over 3 llama-server
// replicas: placed by Tether, at least 95% of hot turns find the previous turn's prompt cached
// (TETHER_MEASURE=1 logs the same workload behind a round-robin balancer for comparison).
func TestEngineReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("engine measurement: skipped with -short")
	}
	engines := replicas(t, 3)
	front, m, _ := engineFront(t, chat.Options{Slots: 4, SlotDir: engines[0].SlotDir()}, engines...)
	run := hotTurns(t, front, 24, 6)
	t.Logf("placed by Tether: %s; %s", run, kvCounts(t, m))
	if len(run.failed) > 0 {
		t.Fatalf("%d turns failed: %v", len(run.failed), run.failed[0])
	}
	if run.survivedFraction() < 0.95 {
		t.Errorf("placed by Tether: %s, want >= 0.95 of hot turns with the previous prompt cached", run)
	}
	if testing.Verbose() && envMeasure() {
		rr := newModel(t, chat.Options{BaseURLs: []string{newRoundRobin(t, engines) + "/v1"}})
		_, rrFront := servertest.Start(t, server.Options{Model: rr})
		t.Logf("round-robin: %s", hotTurns(t, rrFront, 24, 6))
	}
}

// TestEngineReplicaFails stops a replica while conversations placed on it are suspended: their
// next turns continue on the other replicas with the whole conversation (prefilled there), none
// fails, and the replica's failure is counted.
func TestEngineReplicaFails(t *testing.T) {
	engines := replicas(t, 2)
	front, m, _ := engineFront(t, chat.Options{Slots: 4}, engines...)
	base := "ws" + strings.TrimPrefix(front, "http") + "/v1/responses"
	var conns []*wstest.Client
	prev := make([]string, 4)
	turn := func(i, n int) {
		t.Helper()
		c := map[string]any{"type": "response.create", "model": llamatest.Model, "input": "weather " + string(rune('a'+n)) + " of rollout " + string(rune('a'+i)), "max_output_tokens": 600}
		if prev[i] != "" {
			c["previous_response_id"] = prev[i]
		}
		conns[i].Send(c)
		fs := conns[i].Until("response.completed", "response.incomplete", "response.failed")
		last := fs[len(fs)-1]
		if last.Type() == "response.failed" {
			t.Fatalf("conversation %d turn %d failed: %v", i, n, last.Get("response", "error"))
		}
		prev[i] = last.Str("response", "id")
		if last.Type() != "response.completed" {
			prev[i] = ""
		}
	}
	for i := range 4 {
		conns = append(conns, wstest.Dial(t, base, nil))
		turn(i, 0)
	}
	engines[0].Stop()
	for i := range 4 {
		turn(i, 1)
		turn(i, 2)
	}
	if n := modelCounter(t, m, "tether_upstream_moved_total"); n < 1 {
		t.Errorf("%v rollouts moved, want the stopped replica's", n)
	}
	if n := modelCounter(t, m, "tether_upstream_failures_total"); n < 1 {
		t.Errorf("%v upstream failures counted, want the stopped replica's", n)
	}
}
