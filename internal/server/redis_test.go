package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session/store"
)

// redisServer starts a real redis-server and a Tether using it (-store redis://…).
func redisServer(t *testing.T, opts Options) (*redistest.Server, *redis.Client, *Server, string) {
	t.Helper()
	rs := redistest.Start(t)
	st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	opts.Store = st
	if opts.StoreTimeout == 0 {
		opts.StoreTimeout = 2 * time.Second
	}
	s, url := testServer(t, opts)
	return rs, rc, s, url
}

// responseKeys returns the Redis keys of stored responses.
func responseKeys(t *testing.T, rc *redis.Client) []string {
	t.Helper()
	keys, err := rc.Keys(context.Background(), "tether:r:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func publicCreate(input any, stored bool, calls string, extra ...string) map[string]any {
	m := map[string]any{"type": "response.create", "model": "sim", "input": input, "store": stored,
		"tools": []any{shell}, "metadata": map[string]string{"sim.calls": calls}}
	if len(extra) == 1 {
		m["previous_response_id"] = extra[0]
	}
	return m
}

func publicTurn(c *wstest.Client, m map[string]any) []wstest.Frame {
	c.T.Helper()
	c.Send(m)
	return c.Until("response.completed", "response.incomplete", "response.failed")
}

// answerCalls is the input answering every function_call of a segment's terminal Response.
func answerCalls(fs []wstest.Frame) []any {
	var input []any
	out, _ := fs[len(fs)-1].Get("response", "output").([]any)
	for _, it := range out {
		f := wstest.Frame(it.(map[string]any))
		if f.Str("type") == "function_call" {
			input = append(input, map[string]any{"type": "function_call_output", "call_id": f.Str("call_id"), "output": "ok"})
		}
	}
	return input
}

func TestRedisStoreAcrossConnectionsAndKeys(t *testing.T) {
	_, rc, _, url := redisServer(t, Options{Keys: NewKeys("key-a", "key-b")})
	auth := func(k string) http.Header { return http.Header{"Authorization": {"Bearer " + k}} }
	// store:true: a segment suspended at a tool call, continued on a new connection from Redis.
	c := wstest.Dial(t, url, auth("key-a"))
	s1 := publicTurn(c, publicCreate("Remember: amber", true, "1"))
	id := s1[0].Str("response", "id")
	if n := len(responseKeys(t, rc)); n != 1 {
		t.Fatalf("%d response keys after one store:true response, want 1", n)
	}
	c2 := wstest.Dial(t, url, auth("key-a"))
	s2 := publicTurn(c2, publicCreate(answerCalls(s1), true, "1", id))
	if s2[len(s2)-1].Type() != "response.completed" {
		t.Fatalf("cold continuation from Redis: %v", s2[len(s2)-1])
	}
	// Another key does not find it: not over HTTP, not as previous_response_id.
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+id), "key-b", ""); code != 404 {
		t.Fatalf("GET by another key: %d, want 404", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+id), "key-a", ""); code != 200 {
		t.Fatalf("GET by its key: %d, want 200", code)
	}
	cb := wstest.Dial(t, url, auth("key-b"))
	cb.Send(publicCreate(answerCalls(s1), true, "1", id))
	cb.ExpectError(400, "previous_response_not_found", "previous_response_id")
	// store:false is never written: not by the public shape, not by the append shape.
	before := len(responseKeys(t, rc))
	s3 := publicTurn(c, publicCreate("secret", false, "1"))
	publicTurn(c, publicCreate(answerCalls(s3), false, "0", s3[0].Str("response", "id")))
	h := auth("key-a")
	h.Add("OpenAI-Beta", AppendBeta)
	ca := wstest.Dial(t, url, h)
	m := create("secret too", map[string]string{"sim.calls": "1"}, shell)
	m["store"] = false
	rollout(t, ca, m, func(string, string) string { return "ran" })
	if after := responseKeys(t, rc); len(after) != before {
		t.Fatalf("store:false responses wrote to Redis: %d response keys, want %d", len(after), before)
	}
	// An append-shape store:true rollout is stored and continued from Redis on a new connection.
	r := rollout(t, ca, create("Remember: plum", map[string]string{"sim.calls": "1"}, shell), func(string, string) string { return "ran" })
	cn := wstest.Dial(t, url, h)
	m = create("Which colour?", nil)
	m["previous_response_id"] = r[0].Str("response", "id")
	r2 := rollout(t, cn, m, nil)
	if txt := finalText(r2[len(r2)-1]); !strings.Contains(txt, "plum") {
		t.Fatalf("append chain from Redis lost: %q", txt)
	}
}

func TestRedisLostWhileServing(t *testing.T) {
	rs, _, s, url := redisServer(t, Options{StoreTimeout: time.Second})
	c := wstest.Dial(t, url, nil)
	// A store:false segment suspended at a tool call: its continuation is the hot path.
	s1 := publicTurn(c, publicCreate("hello", false, "2"))
	stored := publicTurn(c, publicCreate("kept", true, "0"))
	rs.Stop()

	// A store:true response cannot be stored: it ends failed with store_unavailable, and
	// nothing after created/in_progress claims it was stored.
	fs := publicTurn(c, publicCreate("lost", true, "0"))
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "store_unavailable" {
		t.Fatalf("store:true with Redis down ended %s %v, want response.failed store_unavailable", last.Type(), last.Get("response", "error"))
	}
	// The connection stays usable and its hot path works without Redis.
	hot := s.Counters().Hot.Load()
	s2 := publicTurn(c, publicCreate(answerCalls(s1), false, "2", s1[0].Str("response", "id")))
	if s2[len(s2)-1].Type() != "response.completed" || s.Counters().Hot.Load() != hot+1 {
		t.Fatalf("hot path with Redis down: %s, hot %d → %d", s2[len(s2)-1].Type(), hot, s.Counters().Hot.Load())
	}
	// A lookup that needs Redis: store_unavailable, as an error frame and over HTTP.
	c.Send(publicCreate("x", true, "0", "resp_not_on_this_connection"))
	c.ExpectError(503, "store_unavailable", "")
	if code, body := do(t, "GET", httpURL(url, "/v1/responses/"+stored[0].Str("response", "id")), "", ""); code != 503 ||
		wstest.Frame(body).Str("error", "code") != "store_unavailable" {
		t.Fatalf("GET with Redis down: %d %v", code, body)
	}
	// The append shape: a store:true rollout ends failed with store_unavailable.
	h := http.Header{"OpenAI-Beta": {AppendBeta}}
	ca := wstest.Dial(t, url, h)
	ra := rollout(t, ca, create("append", nil), nil)
	if l := ra[len(ra)-1]; l.Type() != "response.failed" || l.Str("response", "error", "code") != "store_unavailable" {
		t.Fatalf("append store:true with Redis down: %s %v", l.Type(), l.Get("response", "error"))
	}
	if s.store.Errors() == 0 {
		t.Fatal("tether_store_errors_total did not count the failures")
	}
	resp, err := http.Get(httpURL(url, "/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\ntether_store_errors_total ") || strings.Contains(string(metrics), "\ntether_store_errors_total 0\n") {
		t.Fatalf("/metrics has no non-zero tether_store_errors_total")
	}

	// Redis comes back (empty): once the store's client has reconnected (go-redis retries a
	// dial once a second after failed dials, answering with the last dial error meanwhile), the
	// next store:true response is stored, without a restart.
	rs.Restart()
	waitFor(t, func() bool {
		_, err := s.store.Get(context.Background(), "resp_probe", "")
		return errors.Is(err, store.ErrNotFound)
	})
	fs = publicTurn(c, publicCreate("back", true, "0"))
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("after Redis returned: %s %v", l.Type(), l.Get("response", "error"))
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+fs[0].Str("response", "id")), "", ""); code != 200 {
		t.Fatalf("GET after Redis returned: %d", code)
	}
	ra = rollout(t, ca, create("append again", nil), nil)
	if l := ra[len(ra)-1]; l.Type() != "response.completed" {
		t.Fatalf("append after Redis returned: %s", l.Type())
	}
}

// TestAccessLogKeyIDIsRedisOwner checks that the key_id of the access log is the owner id in
// the Redis key of the responses that key stored, so an operator can match the two.
func TestAccessLogKeyIDIsRedisOwner(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, rc, _, wsURL := redisServer(t, Options{Keys: NewKeys("key-a"), Logger: log})
	// One connection for both requests: the second is read only after the first one's handler
	// returned, and the access line is written before it returns.
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	post := func(path, body string) []byte {
		req, _ := http.NewRequest("POST", httpURL(wsURL, path), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer key-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	var created struct{ ID string }
	if err := json.Unmarshal(post("/v1/responses", `{"model":"sim","input":"hi","store":true}`), &created); err != nil || created.ID == "" {
		t.Fatalf("create: %v %+v", err, created)
	}
	post("/v1/models", "") // 405 on the same connection: the create's access line is written
	var keyID string
	for _, line := range strings.Split(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "access" && l["path"] == "/v1/responses" {
			keyID, _ = l["key_id"].(string)
		}
	}
	if keyID == "" {
		t.Fatalf("no access line with a key_id for the create:\n%s", logs.String())
	}
	want := "tether:r:" + keyID + ":" + created.ID
	if keys := responseKeys(t, rc); len(keys) != 1 || keys[0] != want {
		t.Fatalf("Redis keys %v, want [%s]", keys, want)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
