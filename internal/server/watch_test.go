package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tetherd/tether/session"
)

// logBuffer collects JSON log records; safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// access returns the access records written so far.
func (b *logBuffer) access(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "access" {
			out = append(out, rec)
		}
	}
	return out
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func jsonLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func TestAccessLog(t *testing.T) {
	logs := &logBuffer{}
	_, url := testServer(t, Options{Keys: NewKeys("sk-secret-key"), Limits: session.Limits{MaxFrame: 200}, Logger: jsonLogger(logs)})
	if code, _ := do(t, "POST", httpURL(url, "/v1/responses"), "sk-secret-key", `{"model":"sim","input":"hi"}`); code != 200 {
		t.Fatalf("POST: %d", code)
	}
	do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","input":"hi"}`)
	do(t, "POST", httpURL(url, "/v1/responses"), "sk-secret-key", `{"model":"sim","input":"`+strings.Repeat("x", 300)+`"}`)
	do(t, "GET", httpURL(url, "/nowhere"), "sk-secret-key", "")
	h := http.Header{}
	h.Set("Authorization", "Bearer sk-secret-key")
	c, _, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	want := []struct {
		method, path string
		status       float64
		code         string
		key          bool
	}{
		{"POST", "/v1/responses", 200, "", true},
		{"POST", "/v1/responses", 401, "invalid_api_key", false},
		{"POST", "/v1/responses", 413, "request_body_too_large", true},
		{"GET", "/nowhere", 404, "not_found", true},
		{"GET", "/v1/responses", 101, "", true},
	}
	var recs []map[string]any
	deadline := time.Now().Add(10 * time.Second) // the WebSocket line is written when the server sees the close
	for recs = logs.access(t); len(recs) < len(want) && time.Now().Before(deadline); recs = logs.access(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d access lines, want %d:\n%s", len(recs), len(want), logs)
	}
	for i, w := range want {
		r := recs[i]
		code, _ := r["code"].(string)
		_, hasKey := r["key_id"]
		if r["method"] != w.method || r["path"] != w.path || r["status"] != w.status || code != w.code || hasKey != w.key ||
			r["duration"] == nil || r["bytes"] == nil || r["remote"] == nil {
			t.Errorf("line %d: %v, want %+v", i, r, w)
		}
	}
	if strings.Contains(logs.String(), "sk-secret-key") {
		t.Fatalf("the log holds the key:\n%s", logs)
	}
}

func TestAuthBeforeRouting(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("k")})
	for _, r := range []struct{ method, path string }{{"GET", "/nowhere"}, {"DELETE", "/v1/models"}, {"PUT", "/v1/responses"}, {"GET", "/debug/pprof/"}} {
		if code, body := do(t, r.method, httpURL(url, r.path), "", ""); code != 401 {
			t.Errorf("%s %s without a key: %d %v, want 401", r.method, r.path, code, body)
		}
	}
	if code, _ := do(t, "GET", httpURL(url, "/nowhere"), "k", ""); code != 404 {
		t.Errorf("GET /nowhere with the key: %d, want 404", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/healthz"), "", ""); code != 200 {
		t.Errorf("/healthz without a key: %d", code)
	}
}

func TestHTTPErrorsCounted(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("k"), MetricsKeys: NewKeys("scraper")})
	do(t, "GET", httpURL(url, "/nowhere"), "k", "")
	do(t, "GET", httpURL(url, "/nowhere"), "k", "")
	do(t, "POST", httpURL(url, "/v1/responses"), "", "{}")
	do(t, "POST", httpURL(url, "/v1/responses"), "k", "{")
	do(t, "GET", httpURL(url, "/metrics"), "k", "")
	req, _ := http.NewRequest("GET", httpURL(url, "/metrics"), nil)
	req.Header.Set("Authorization", "Bearer scraper")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tether_errors_total{code="not_found"} 2`, `tether_errors_total{code="invalid_api_key"} 1`, `tether_errors_total{code="invalid_json"} 1`, `tether_errors_total{code="permission_denied"} 1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestModels(t *testing.T) {
	_, url := testServer(t, Options{})
	code, body := do(t, "GET", httpURL(url, "/v1/models"), "", "")
	data, _ := body["data"].([]any)
	if code != 200 || body["object"] != "list" || len(data) != 1 {
		t.Fatalf("GET /v1/models: %d %v", code, body)
	}
	if m := data[0].(map[string]any); m["id"] != "sim" || m["object"] != "model" || m["owned_by"] != "tether" || m["created"] == nil {
		t.Fatalf("model: %v", m)
	}
	if code, m := do(t, "GET", httpURL(url, "/v1/models/sim"), "", ""); code != 200 || m["id"] != "sim" {
		t.Fatalf("GET /v1/models/sim: %d %v", code, m)
	}
	if code, m := do(t, "GET", httpURL(url, "/v1/models/gpt-x"), "", ""); code != 404 || m["error"].(map[string]any)["code"] != "model_not_found" {
		t.Fatalf("GET /v1/models/gpt-x: %d %v", code, m)
	}
	_, url = testServer(t, Options{Models: []ModelInfo{{ID: "a", Object: "model", OwnedBy: "x"}, {ID: "b", Object: "model", OwnedBy: "x"}}})
	if _, body := do(t, "GET", httpURL(url, "/v1/models"), "", ""); len(body["data"].([]any)) != 2 {
		t.Fatalf("Options.Models: %v", body)
	}
}

func TestPprof(t *testing.T) {
	_, url := testServer(t, Options{})
	if code, _ := do(t, "GET", httpURL(url, "/debug/pprof/"), "", ""); code != 404 {
		t.Fatalf("pprof off by default: %d", code)
	}
	_, url = testServer(t, Options{Pprof: true, Keys: NewKeys("k")})
	if code, _ := do(t, "GET", httpURL(url, "/debug/pprof/"), "", ""); code != 401 {
		t.Fatalf("pprof without key: %d", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/debug/pprof/goroutine?debug=1"), "k", ""); code != 200 {
		t.Fatalf("pprof with key: %d", code)
	}
}

// TestShutdownRefusesNewWorkAndEndGrace: during the drain /healthz answers 503 and a new POST
// 503 server_shutting_down (with Retry-After: 1) while the in-flight rollout keeps streaming;
// EndGrace ends it at once with its terminal event although the grace is a minute.
func TestShutdownRefusesNewWorkAndEndGrace(t *testing.T) {
	s, url := testServer(t, Options{Model: slowModel(), Limits: session.Limits{ShutdownGrace: time.Minute}})
	c := dialAppend(t, url)
	c.Send(create("long", map[string]string{"sim.answer_tokens": "100000"}))
	fs := c.Until("response.output_text.delta")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.BeginShutdown() // draining from its return: no window where /healthz still says ok
	if !s.ShuttingDown() {
		t.Fatal("ShuttingDown is false after BeginShutdown")
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Shutdown(ctx) }()
	if code, body := do(t, "GET", httpURL(url, "/healthz"), "", ""); code != 503 || body["status"] != "shutting_down" {
		t.Fatalf("/healthz during the drain: %d %v", code, body)
	}
	code, body := do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","input":"new"}`)
	if e, _ := body["error"].(map[string]any); code != 503 || e["code"] != "server_shutting_down" {
		t.Fatalf("POST during the drain: %d %v", code, body)
	}
	// Both refusals say when to retry (on a new connection: the POST's is closed), as every 503
	// of a full server does.
	resp, err := http.Post(httpURL(url, "/v1/responses"), "application/json", strings.NewReader(`{"model":"sim","input":"new"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("POST during the drain: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, up, err := websocket.Dial(ctx, url, nil)
	if err == nil || up == nil || up.StatusCode != 503 || up.Header.Get("Retry-After") != "1" {
		t.Fatalf("upgrade during the drain: %v %v", err, up)
	}
	fs = append(fs, c.Until("response.output_text.delta")...) // still streaming
	s.EndGrace()
	fs = append(fs, c.Until("response.incomplete")...)
	checkGrammar(t, fs)
	if r := fs[len(fs)-1].Str("response", "incomplete_details", "reason"); r != "server_shutdown" {
		t.Fatalf("reason %q, want server_shutdown", r)
	}
	c.ExpectClose(websocket.StatusGoingAway)
	if err := <-errc; err != nil {
		t.Fatalf("Shutdown after EndGrace: %v", err)
	}
}

// TestPublicRolloutEndLogged: a public-shape POST whose Response completed is logged as released
// when its request ends, not as a cancelled rollout.
func TestPublicRolloutEndLogged(t *testing.T) {
	logs := &logBuffer{}
	s, url := testServer(t, Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if code, body := do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","input":"hi"}`); code != 200 || body["status"] != "completed" {
		t.Fatalf("POST: %d %v", code, body)
	}
	waitNoConns(t, s)
	var ended []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		_ = json.Unmarshal([]byte(line), &rec)
		if m, _ := rec["msg"].(string); strings.HasPrefix(m, "rollout ended") || strings.HasPrefix(m, "rollout released") {
			ended = append(ended, rec)
		}
	}
	if len(ended) != 1 || ended[0]["msg"] != "rollout released" || ended[0]["state"] != "suspended" || ended[0]["reason"] != nil {
		t.Fatalf("rollout end lines: %v\n%s", ended, logs)
	}
}
