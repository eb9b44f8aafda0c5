package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// bigTool is a function tool whose description is n bytes.
func bigTool(n int) map[string]any {
	return map[string]any{"type": "function", "name": "exec_command", "description": strings.Repeat("d", n),
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}
}

// suspend sends an append-shape create that suspends at one tool call and waits for it.
func suspend(t *testing.T, c *wstest.Client, tool map[string]any) {
	t.Helper()
	c.Send(create("run it", map[string]string{"sim.calls": "1"}, tool))
	if fs := c.Until("response.done"); fs[len(fs)-1].Type() != "response.done" {
		t.Fatal("no suspension")
	}
}

func dialKey(t *testing.T, url, key string) *wstest.Client {
	t.Helper()
	h := http.Header{}
	h.Add("OpenAI-Beta", AppendBeta)
	h.Set("Authorization", "Bearer "+key)
	return wstest.Dial(t, url, h)
}

// post sends a POST /v1/responses body with key and returns the status and decoded answer.
func post(t *testing.T, url, key string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	return do(t, "POST", httpURL(url, "/v1/responses"), key, string(b))
}

func TestToolsCountTowardRolloutBytes(t *testing.T) {
	_, url := testServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20, MaxRolloutBytes: 256 << 10}})
	c := dialAppend(t, url)
	c.Send(create("hi", nil, bigTool(300<<10)))
	c.ExpectError(400, "rollout_too_large", "input")
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "hi", "instructions": strings.Repeat("i", 300<<10)})
	c.ExpectError(400, "rollout_too_large", "input")
}

// The first example, scaled down: suspended rollouts with large tools on one
// connection are bounded by the connection's bytes, not only by their count.
func TestConnectionHeldBytesBound(t *testing.T) {
	_, url := testServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20, CacheBytes: 512 << 10, MaxRolloutBytes: 256 << 10}})
	c := dialAppend(t, url)
	suspend(t, c, bigTool(200<<10))
	suspend(t, c, bigTool(200<<10))
	c.Send(create("run it", map[string]string{"sim.calls": "1"}, bigTool(200<<10)))
	c.ExpectError(429, "rollout_limit_reached", "")
}

func TestServerBudgetCountsHeldRollouts(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20, MaxRolloutBytes: 1 << 20}, MaxMemory: 8 << 20})
	var held int
	for i := 0; ; i++ {
		c := dialAppend(t, url)
		c.Send(create("run it", map[string]string{"sim.calls": "1"}, bigTool(700<<10)))
		f := c.Next()
		if f.Type() == "error" {
			if f.Str("error", "code") != "server_overloaded" || f.Num("status") != 503 {
				t.Fatalf("over the budget: %v", f)
			}
			break
		}
		c.Until("response.done")
		held++
		if i > 10 {
			t.Fatalf("%d rollouts of 700 KiB held within an 8 MiB budget", held)
		}
	}
	// Bytes in flight (the refused frame being read, the error being written) may stand over
	// the bound for a moment; what the held rollouts keep must settle within it.
	for deadline := time.Now().Add(5 * time.Second); held == 0 || s.Budget().InUse() > 8<<20; time.Sleep(10 * time.Millisecond) {
		if held == 0 || time.Now().After(deadline) {
			t.Fatalf("held %d rollouts, budget in use %d", held, s.Budget().InUse())
		}
	}
}

// -store-bytes holds on the real size: tools count.
func TestStoreCountsRealSize(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, StoreBytes: 1 << 20})
	var ids []string
	for range 6 {
		code, r := post(t, url, "", map[string]any{"model": "sim", "input": "hi", "tools": []any{bigTool(300 << 10)}})
		if code != 200 {
			t.Fatalf("POST: %d %v", code, r)
		}
		ids = append(ids, r["id"].(string))
	}
	ms := s.opts.Store.(*store.Memory)
	if ms.Bytes() > 1<<20 || ms.Len() > 3 {
		t.Fatalf("store holds %d responses, %d bytes, over its 1 MiB bound", ms.Len(), ms.Bytes())
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+ids[0]), "", ""); code != 404 {
		t.Fatalf("the oldest response was not evicted: %d", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+ids[5]), "", ""); code != 200 {
		t.Fatalf("the newest response: %d", code)
	}
}

// Key B's flood of stored responses evicts only B's own.
func TestKeyStoreQuota(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b"), StoreResponses: 30, KeyStoredResponses: 10})
	code, a := post(t, url, "key-a", map[string]any{"model": "sim", "input": "keep me"})
	if code != 200 {
		t.Fatalf("A's POST: %d", code)
	}
	for range 40 {
		if code, r := post(t, url, "key-b", map[string]any{"model": "sim", "input": "flood"}); code != 200 {
			t.Fatalf("B's POST: %d %v", code, r)
		}
	}
	if code, r := do(t, "GET", httpURL(url, "/v1/responses/"+a["id"].(string)), "key-a", ""); code != 200 {
		t.Fatalf("A's stored response after B's flood: %d %v", code, r)
	}
	code, r := post(t, url, "key-a", map[string]any{"model": "sim", "input": "more", "previous_response_id": a["id"]})
	if code != 200 {
		t.Fatalf("A's continuation after B's flood: %d %v", code, r)
	}
}

// A refused GET by B of A's id does not change A's eviction order.
func TestNonOwnerLookupTouchesNothing(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b"), StoreResponses: 3, KeyStoredResponses: -1})
	var ids []string
	for range 3 {
		_, r := post(t, url, "key-a", map[string]any{"model": "sim", "input": "x"})
		ids = append(ids, r["id"].(string))
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+ids[0]), "key-b", ""); code != 404 {
		t.Fatalf("B's GET of A's response: %d", code)
	}
	post(t, url, "key-a", map[string]any{"model": "sim", "input": "x"}) // evicts the least recently used
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+ids[0]), "key-a", ""); code != 404 {
		t.Fatalf("B's GET moved A's oldest response: it survived (%d)", code)
	}
	if code, _ := do(t, "GET", httpURL(url, "/v1/responses/"+ids[1]), "key-a", ""); code != 200 {
		t.Fatalf("A's second response: %d", code)
	}
}

// Key B's suspended rollouts do not make key A's creates fail.
func TestKeyRolloutQuota(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b"), KeyRollouts: 2})
	b1, b2 := dialKey(t, url, "key-b"), dialKey(t, url, "key-b")
	suspend(t, b1, shell)
	suspend(t, b2, shell)
	b2.Send(create("more", map[string]string{"sim.calls": "1"}, shell))
	b2.ExpectError(429, "quota_exceeded", "")
	a := dialKey(t, url, "key-a")
	suspend(t, a, shell)
	code, r := post(t, url, "key-b", map[string]any{"model": "sim", "input": "x"})
	if e, _ := r["error"].(map[string]any); code != 429 || e["code"] != "quota_exceeded" {
		t.Fatalf("B's POST over its rollout quota: %d %v", code, r)
	}
	if code, r := post(t, url, "key-a", map[string]any{"model": "sim", "input": "x"}); code != 200 {
		t.Fatalf("A's POST: %d %v", code, r)
	}
}

func TestKeyConnectionQuota(t *testing.T) {
	_, url := testServer(t, Options{Keys: NewKeys("key-a", "key-b"), KeyConnections: 2, MetricsKeys: NewKeys("scraper")})
	dialKey(t, url, "key-b")
	dialKey(t, url, "key-b")
	h := http.Header{}
	h.Set("Authorization", "Bearer key-b")
	_, resp, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: h})
	if err == nil || resp == nil || resp.StatusCode != 429 {
		t.Fatalf("B's third connection: %v %v", resp, err)
	}
	dialKey(t, url, "key-a")
	// Counted per rejection, 401s included.
	do(t, "GET", httpURL(url, "/v1/responses/x"), "wrong", "")
	req, _ := http.NewRequest("GET", httpURL(url, "/metrics"), nil)
	req.Header.Set("Authorization", "Bearer scraper")
	mr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	for _, want := range []string{`tether_limit_rejections_total{limit="key_connections"} 1`, `tether_errors_total{code="invalid_api_key"} 1`, `tether_errors_total{code="quota_exceeded"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
