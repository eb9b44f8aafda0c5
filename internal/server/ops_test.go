package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/peer"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

func httpURL(wsURL, path string) string {
	return "http" + strings.TrimPrefix(strings.TrimSuffix(wsURL, "/v1/responses"), "ws") + path
}

func do(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestAPIKeys(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b")})
	// The upgrade without a key: 401 with the OpenAI error body.
	_, resp, err := websocket.Dial(t.Context(), url, nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("upgrade without key: %v %v", resp, err)
	}
	code, body := do(t, "POST", httpURL(url, "/v1/responses"), "wrong", `{"model":"m","input":"x"}`)
	if e, _ := body["error"].(map[string]any); code != 401 || e["code"] != "invalid_api_key" || e["type"] == nil {
		t.Fatalf("wrong key: %d %v", code, body)
	}
	if code, _ := do(t, "GET", httpURL(url, "/healthz"), "", ""); code != 200 {
		t.Fatalf("/healthz needs no key: %d", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/metrics"), "", ""); code != 401 {
		t.Fatalf("/metrics without key: %d", code)
	}
	// Stored responses belong to their key.
	code, r := do(t, "POST", httpURL(url, "/v1/responses"), "key-a", `{"model":"m","input":"secret plan"}`)
	if code != 200 {
		t.Fatalf("POST with key: %d %v", code, r)
	}
	id := r["id"].(string)
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+id), "key-b", ""); code != 404 {
		t.Fatalf("another key read a stored response: %d", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+id), "key-a", ""); code != 200 {
		t.Fatalf("owner cannot read its response: %d", code)
	}
	code, e := do(t, "POST", httpURL(url, "/v1/responses"), "key-b", `{"model":"m","input":"x","previous_response_id":"`+id+`"}`)
	if code != 400 || e["error"].(map[string]any)["code"] != "previous_response_not_found" {
		t.Fatalf("another key continued a stored response: %d %v", code, e)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer key-b")
	c := wstest.Dial(t, url, h)
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "x", "previous_response_id": id})
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
}

func TestWebSocketDisabled(t *testing.T) {
	_, url := testServer(t, Options{DisableWebSocket: true})
	_, resp, err := websocket.Dial(t.Context(), url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("want 426, got %v %v", resp, err)
	}
}

func TestConnectionCap(t *testing.T) {
	_, url := testServer(t, Options{MaxConnections: 1})
	dialAppend(t, url)
	_, resp, err := websocket.Dial(t.Context(), url, nil)
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("want 503 over the cap, got %v %v", resp, err)
	}
	// As every other 503 of a full server, it says when to try again.
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("503 too_many_connections: Retry-After %q, want \"1\"", got)
	}
}

func TestRolloutLimit(t *testing.T) {
	_, url := testServer(t, Options{Limits: session.Limits{MaxSuspended: 1}})
	c := dialAppend(t, url)
	c.Send(create("one", nil, shell))
	c.Until("response.done")
	c.Send(create("two", nil, shell))
	c.ExpectError(429, "rollout_limit_reached", "")
}

func TestMetrics(t *testing.T) {
	s, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.SendRaw("not json")
	c.ExpectError(400, "invalid_json", "")
	c.Send(create("task", nil, shell))
	c.Until("response.done")
	code, _ := do(t, "GET", httpURL(url, "/metrics"), "", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	resp, _ := http.Get(httpURL(url, "/metrics"))
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(raw)
	for _, want := range []string{
		`tether_connections{shape="append"} 1`,
		`tether_rollouts{state="suspended"} 1`,
		`tether_errors_total{code="invalid_json"} 1`,
		`tether_turn_seconds_count 1`,
		`tether_continuations_total{path="hot"}`,
		`tether_store_responses`,
		`tether_ws_frames_sent_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	deadline := time.Now().Add(5 * time.Second) // connections add their counts at least every 1.25 s
	for s.Metrics().Frames.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no frames counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDeadPeerIsDropped(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{PingInterval: 50 * time.Millisecond}})
	c := dialAppend(t, url)
	c.Send(create("task", nil, shell))
	// The client never reads again, so it never answers a ping.
	deadline := time.Now().Add(10 * time.Second)
	for s.Metrics().PeersDropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a peer that does not answer pings was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitNoConns(t, s)
	if n := s.Metrics().Suspended.Load() + s.Metrics().Sampling.Load() + s.Metrics().Queued.Load(); n != 0 {
		t.Fatalf("%d rollouts left after the peer was dropped", n)
	}
}

func TestSlowReaderIsDropped(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{WriteTimeout: 200 * time.Millisecond}})
	c := dialAppend(t, url)
	// Large frames (each Response echoes a tool with a 4 MiB description, which is not
	// rendered) to a client that never reads: the socket buffers fill and a write times out.
	big := create("task", nil, map[string]any{"type": "function", "name": "big", "description": strings.Repeat("x", 4<<20)})
	frame, _ := json.Marshal(big)
	for i := 0; i < 4; i++ {
		if err := c.C.Write(t.Context(), websocket.MessageText, frame); err != nil {
			break // the server may drop us before the last one
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Metrics().PeersDropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a client that stopped reading was not dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitNoConns(t, s)
}

func TestRolloutTooLarge(t *testing.T) {
	_, url := testServer(t, Options{Limits: session.Limits{MaxRolloutBytes: 4096}})
	c := dialAppend(t, url)
	c.Send(create(strings.Repeat("a", 5000), nil))
	c.ExpectError(400, "rollout_too_large", "input")
	c.Send(create("small", nil, shell))
	fs := c.Until("response.done")
	done := fs[len(fs)-1]
	big := map[string]any{"type": "function_call_output", "call_id": pendingIDs(done)[0], "output": strings.Repeat("b", 5000)}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{big}})
	c.ExpectError(400, "rollout_too_large", "input")
	// The rollout is unchanged and still suspended: a small output resumes it.
	small := map[string]any{"type": "function_call_output", "call_id": pendingIDs(done)[0], "output": "ok"}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{small}})
	c.Until("response.completed")
}

func TestShutdownEndsHTTPStreams(t *testing.T) {
	s, url := testServer(t, Options{Model: slowModel(), Limits: session.Limits{ShutdownGrace: -1}})
	req, _ := http.NewRequest("POST", httpURL(url, "/v1/responses"),
		strings.NewReader(`{"model":"sim","input":"x","stream":true,"metadata":{"sim.answer_tokens":"3000"}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has begun
		t.Fatal(err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), "event: response.incomplete") || !strings.Contains(string(rest), `"reason":"server_shutdown"`) {
		t.Fatalf("the SSE stream did not end with response.incomplete server_shutdown: ...%s", rest[max(0, len(rest)-300):])
	}
}

// TestMetricsAccess: who reads GET /metrics on the main listener and on the listener of
// MetricsHandler, for each configuration.
func TestMetricsAccess(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		// main: the status on the main listener of no key, the API key "k" and the metrics key
		// "m"; own: the same on the MetricsHandler listener
		main, own [3]int
	}{
		{"open", Options{}, [3]int{200, 200, 200}, [3]int{200, 200, 200}},
		{"keys", Options{Keys: NewKeys("k")}, [3]int{401, 403, 401}, [3]int{200, 200, 200}},
		{"keys and metrics key", Options{Keys: NewKeys("k"), MetricsKeys: NewKeys("m")}, [3]int{401, 403, 200}, [3]int{401, 401, 200}},
		{"open and metrics key", Options{MetricsKeys: NewKeys("m")}, [3]int{401, 401, 200}, [3]int{401, 401, 200}},
		{"keys and own listener", Options{Keys: NewKeys("k"), MetricsOwnListener: true}, [3]int{401, 403, 401}, [3]int{200, 200, 200}},
		{"open and own listener", Options{MetricsOwnListener: true}, [3]int{403, 403, 403}, [3]int{200, 200, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, url := testServer(t, c.opts)
			own := httptest.NewServer(s.MetricsHandler())
			defer own.Close()
			for i, key := range []string{"", "k", "m"} {
				for _, l := range []struct {
					base string
					want int
				}{{httpURL(url, ""), c.main[i]}, {own.URL, c.own[i]}} {
					code, body := do(t, "GET", l.base+"/metrics", key, "")
					e, _ := body["error"].(map[string]any)
					switch {
					case code != l.want:
						t.Errorf("%s/metrics with %q: %d, want %d", l.base, key, code, l.want)
					case code == 403 && e["code"] != "permission_denied", code == 401 && e["code"] != "invalid_api_key":
						t.Errorf("%s/metrics with %q: %v", l.base, key, body)
					}
				}
			}
		})
	}
}

// TestSlowReaderKeepsAnsweringPings: a peer answers a ping only once it has read what was sent
// before it, so a peer still reading a long answer answers late. While it reads, it is alive:
// the server waits for its late pong and keeps it. Here the peer reads the answer as it comes
// but holds the pong of every ping that arrives while the answer streams until the answer has
// ended, several ping intervals later (a slow reader's late pong, without depending on how
// slowly the test's goroutine happens to run). It must get the whole answer, then serve another
// response on the same connection, and no peer is dropped.
func TestSlowReaderKeepsAnsweringPings(t *testing.T) {
	const interval = time.Second
	s, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.Speed1000, Realtime: true}),
		Limits: session.Limits{PingInterval: interval}})
	p := dialRawWS(t, url, http.Header{"OpenAI-Beta": {AppendBeta}})
	// About 4 s of deltas at 1,000 tokens/s: pings arrive while they stream.
	p.send(create("long", map[string]string{"sim.answer_tokens": "4000"}))
	streaming := false
	var held []byte // the payload of the ping whose pong is held
	var heldAt time.Time
	late := time.Duration(0) // the latest pong
	for done := false; !done; {
		op, data := p.next()
		switch op {
		case opPing:
			if !streaming {
				p.pong(data)
				continue
			}
			if held != nil {
				t.Fatal("a second ping came before the first was answered")
			}
			held, heldAt = data, time.Now()
		case opClose:
			t.Fatalf("the server closed the connection (%s) while the peer was reading; %d peers dropped", closeText(data), s.Metrics().PeersDropped.Load())
		case opText:
			switch typ := peer.EventType(data); {
			case typ == "response.output_text.delta":
				streaming = true
			case peer.IsTerminal(typ) || typ == "error":
				if typ != "response.completed" {
					t.Fatalf("the answer ended %s: %s", typ, data)
				}
				done = true
			}
		}
	}
	if held != nil {
		late = time.Since(heldAt)
		p.pong(held)
	}
	if late < 2*interval {
		t.Fatalf("the longest-held pong went out %v after its ping, want two ping intervals (%v) or more: the test did not make a pong late", late, 2*interval)
	}
	// The connection still serves; pings are answered at once from here on.
	p.send(create("again", map[string]string{"sim.answer_tokens": "10"}))
	for {
		op, data := p.next()
		if op == opPing {
			p.pong(data)
			continue
		}
		if op == opClose {
			t.Fatalf("the server closed the connection (%s)", closeText(data))
		}
		if typ := peer.EventType(data); peer.IsTerminal(typ) || typ == "error" {
			if typ != "response.completed" {
				t.Fatalf("the second response ended %s: %s", typ, data)
			}
			break
		}
	}
	if d := s.Metrics().PeersDropped.Load(); d != 0 {
		t.Fatalf("%d peers dropped, want the reading peer kept", d)
	}
}

// TestDroppedPeerCloseReason: the "connection closed" line of a peer the server dropped gives
// the drop's reason, with the connection's remote address, not the read error the drop caused.
func TestDroppedPeerCloseReason(t *testing.T) {
	var mu sync.Mutex
	var closed []string
	log := slog.New(recordHandler(func(r slog.Record) {
		if r.Message != "connection closed" {
			return
		}
		line := ""
		r.Attrs(func(a slog.Attr) bool { line += a.Key + "=" + a.Value.String() + " "; return true })
		mu.Lock()
		closed = append(closed, line)
		mu.Unlock()
	}))
	s, url := testServer(t, Options{Logger: log, Limits: session.Limits{WriteTimeout: 200 * time.Millisecond}})
	c := dialAppend(t, url)
	c.Send(create("a long answer", map[string]string{"sim.answer_tokens": "200000", "sim.speed": "instant"}))
	// The client never reads: the socket buffers fill and a write times out. The connection
	// may leave the server's count before its close is logged: wait for both.
	waitNoConns(t, s)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(closed) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(closed) != 1 || !strings.Contains(closed[0], "reason=dropped: write timeout: the client is not reading") ||
		!strings.Contains(closed[0], "remote=127.0.0.1:") {
		t.Fatalf("connection closed lines %q, want one giving the drop's reason", closed)
	}
}
