package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
)

// The tests of this file run the built binary with small limits and show each limit acting
// over real sockets.

// limitServer starts the built binary with args and keeps its log drained; it returns the
// base URL.
func limitServer(t *testing.T, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	p := startServe(t, buildTether(t), args...)
	go func() {
		for range p.lines { // ends when the process's stderr closes (the test's cleanup)
		}
	}()
	return "http://" + p.addr
}

// keysFile writes API keys, one per line, and returns the file's path.
func keysFile(t *testing.T, keys ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(f, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// call sends one request with key ("" for none) and returns the status and the decoded JSON
// body (nil when it is not JSON).
func call(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// overloadedAnswer posts body to url, whose server's memory budget is full, and checks that
// the 503 says what it had no room for and what holds the budget, and asks the client to
// retry after a second.
func overloadedAnswer(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(b), "no room for this request body: it is held by the requests, rollouts and kept responses") {
		t.Fatalf("POST %s with the budget full: %d, Retry-After %q, %s", url, resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

// errCode is the error code of an error body.
func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// storeOne creates a stored response for key with input text and returns its id.
func storeOne(t *testing.T, base, key, text string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim", "input": text, "store": true})
	code, m := call(t, "POST", base+"/v1/responses", key, string(b))
	if code != 200 || m["status"] != "completed" {
		t.Fatalf("stored create: %d %v", code, m)
	}
	return m["id"].(string)
}

// stored reports which of ids key can still GET (true) or get 404 for (false).
func stored(t *testing.T, base, key string, ids []string) []bool {
	t.Helper()
	out := make([]bool, len(ids))
	for i, id := range ids {
		code, m := call(t, "GET", base+"/v1/responses/"+id, key, "")
		switch {
		case code == 200:
			out[i] = true
		case code != 404 || errCode(m) != "response_not_found":
			t.Fatalf("GET %s: %d %v", id, code, m)
		}
	}
	return out
}

// metric reads one sample of /metrics: the first line that starts with series (a name with
// its labels, e.g. `tether_limit_rejections_total{limit="memory_budget"}`).
func metric(t *testing.T, base, key, series string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics %s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

// waitUntil polls cond (a state of the server) until it holds, for at most a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stores are the -store values the store limits are shown on: the memory store, and a
// Redis started for the test.
var stores = []string{"memory", "redis"}

// storeArg returns the -store value of kind, starting a redis-server for "redis".
func storeArg(t *testing.T, kind string) string {
	t.Helper()
	if kind == "redis" {
		return redistest.Start(t).URL()
	}
	return kind
}

// TestLimitKeyStoreResponses: with -key-store-responses 3, key B's ten stored responses evict
// only B's own oldest; key A's response survives, in either store.
func TestLimitKeyStoreResponses(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			base := limitServer(t, "-store", storeArg(t, kind), "-api-keys", keysFile(t, "key-a", "key-b"), "-key-store-responses", "3",
				"-metrics-key-file", keysFile(t, "scraper"))
			a := storeOne(t, base, "key-a", "a")
			var b []string
			for i := range 10 {
				b = append(b, storeOne(t, base, "key-b", fmt.Sprint("b", i)))
			}
			if got := stored(t, base, "key-a", []string{a}); !got[0] {
				t.Fatal("key A's response was evicted by key B's")
			}
			if got := fmt.Sprint(stored(t, base, "key-b", b)); got != "[false false false false false false false true true true]" {
				t.Fatalf("key B's responses kept: %s, want its last 3", got)
			}
			if n := metric(t, base, "scraper", `tether_store_evictions_total{reason="key_quota"}`); n != 7 {
				t.Fatalf("key_quota evictions %v, want 7", n)
			}
		})
	}
}

// TestLimitKeyStoreBytes: with -key-store-bytes 100KiB, key B's 40 KiB responses evict B's
// own oldest once B holds more than 100 KiB; key A's response survives, in either store.
func TestLimitKeyStoreBytes(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			base := limitServer(t, "-store", storeArg(t, kind), "-api-keys", keysFile(t, "key-a", "key-b"), "-key-store-bytes", "100KiB")
			a := storeOne(t, base, "key-a", "a")
			var b []string
			for i := range 6 {
				b = append(b, storeOne(t, base, "key-b", fmt.Sprint(i)+strings.Repeat("x", 40<<10)))
			}
			if got := stored(t, base, "key-a", []string{a}); !got[0] {
				t.Fatal("key A's response was evicted by key B's")
			}
			if got := fmt.Sprint(stored(t, base, "key-b", b)); got != "[false false false false true true]" {
				t.Fatalf("key B's responses kept: %s, want its last 2 (2 × 40 KiB of answer and input fit in 100 KiB)", got)
			}
		})
	}
}

// TestLimitStoreResponsesShare: a key's default share follows the store: with
// -store-responses 8 a key keeps 2 (a quarter), so key B's five responses do not evict key
// A's, in either store.
func TestLimitStoreResponsesShare(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			base := limitServer(t, "-store", storeArg(t, kind), "-api-keys", keysFile(t, "key-a", "key-b"), "-store-responses", "8")
			a := storeOne(t, base, "key-a", "a")
			var b []string
			for i := range 5 {
				b = append(b, storeOne(t, base, "key-b", fmt.Sprint("b", i)))
			}
			if got := stored(t, base, "key-a", []string{a}); !got[0] {
				t.Fatal("key A's response was evicted")
			}
			if got := fmt.Sprint(stored(t, base, "key-b", b)); got != "[false false false true true]" {
				t.Fatalf("key B's responses kept: %s, want its last 2 (a quarter of -store-responses 8)", got)
			}
		})
	}
}

// TestLimitRedisFull: a Redis at its maxmemory (noeviction) long before -store-bytes is
// answered like a full memory store: every store:true create completes (200, completed),
// the least recently used responses are evicted (tether_store_evictions_total{reason=
// "store_full"}), reads go on, and Redis stays about at its maxmemory.
func TestLimitRedisFull(t *testing.T) {
	rs := redistest.Start(t)
	base := limitServer(t, "-store", rs.URL(), "-api-keys", keysFile(t, "key-a", "key-b"), "-model-speed", "instant",
		"-metrics-key-file", keysFile(t, "scraper"))
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer admin.Close()
	ctx := t.Context()
	used := func() int64 {
		info, err := admin.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no used_memory")
		return 0
	}
	a := storeOne(t, base, "key-a", "a")
	limit := used() + 4<<20
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory", fmt.Sprint(limit)).Err(); err != nil {
		t.Fatal(err)
	}
	var b []string
	var peak int64
	for i := range 40 { // 16 MB of input into 4 MB
		b = append(b, storeOne(t, base, "key-b", fmt.Sprint(i)+strings.Repeat("x", 400<<10)))
		peak = max(peak, used())
	}
	if got := stored(t, base, "key-b", b[len(b)-2:]); !got[0] || !got[1] {
		t.Fatalf("key B's newest responses: %v, want both stored", got)
	}
	if got := stored(t, base, "key-a", []string{a}); got[0] {
		t.Fatal("key A's response outlived a full Redis: want the least recently used evicted")
	}
	if n := metric(t, base, "scraper", `tether_store_evictions_total{reason="store_full"}`); n < 20 {
		t.Fatalf("store_full evictions %v, want most of key B's 40 responses", n)
	}
	if n := metric(t, base, "scraper", "tether_store_errors_total"); n != 0 {
		t.Fatalf("%v store errors with Redis full", n)
	}
	t.Logf("maxmemory %d, peak used_memory %d", limit, peak)
	if peak > limit+4*(400<<10) {
		t.Fatalf("Redis used %d bytes at its peak, maxmemory %d", peak, limit)
	}
}

// TestLimitChainMissing: a continuation whose chain lost a middle response (deleted) gets
// previous_response_not_found naming that response, in either store.
func TestLimitChainMissing(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			base := limitServer(t, "-store", storeArg(t, kind))
			prev := ""
			var ids []string
			for i := range 3 {
				req := map[string]any{"model": "sim", "input": fmt.Sprint("turn ", i), "store": true}
				if prev != "" {
					req["previous_response_id"] = prev
				}
				body, _ := json.Marshal(req)
				code, m := call(t, "POST", base+"/v1/responses", "", string(body))
				if code != 200 {
					t.Fatalf("turn %d: %d %v", i, code, m)
				}
				prev = m["id"].(string)
				ids = append(ids, prev)
			}
			if code, m := call(t, "DELETE", base+"/v1/responses/"+ids[1], "", ""); code != 200 {
				t.Fatalf("DELETE the middle response: %d %v", code, m)
			}
			body, _ := json.Marshal(map[string]any{"model": "sim", "input": "next", "previous_response_id": ids[2]})
			code, m := call(t, "POST", base+"/v1/responses", "", string(body))
			e, _ := m["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if code != 400 || errCode(m) != "previous_response_not_found" || !strings.Contains(msg, "'"+ids[1]+"'") {
				t.Fatalf("continuing %s with %s deleted: %d %v, want previous_response_not_found naming %s", ids[2], ids[1], code, m, ids[1])
			}
		})
	}
}

// TestLimitStoreFull: a full memory store still answers every store:true create with a
// completed response (200) and evicts the least recently used; the evicted ids get 404.
func TestLimitStoreFull(t *testing.T) {
	base := limitServer(t, "-store-responses", "4", "-key-store-responses", "0")
	var ids []string
	for i := range 7 {
		ids = append(ids, storeOne(t, base, "", fmt.Sprint("r", i)))
	}
	if got := fmt.Sprint(stored(t, base, "", ids)); got != "[false false false true true true true]" {
		t.Fatalf("kept: %s, want the last 4", got)
	}
	if n := metric(t, base, "", `tether_store_evictions_total{reason="store_bound"}`); n != 3 {
		t.Fatalf("store_bound evictions %v, want 3", n)
	}
}

// rawPost opens a connection and sends a POST's headers (Content-Length n) and the first
// part of its body; the caller sends the rest or closes it.
func rawPost(t *testing.T, base, path string, n int, part string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, n, part); err != nil {
		t.Fatal(err)
	}
	return c
}

// readStatus reads the status code of the answer on c.
func readStatus(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLimitWriteTimeoutLongStream: -write-timeout bounds one write, not a whole answer: a
// streamed chat completion that takes three times the timeout reaches its finish chunk and
// [DONE], as a /v1/responses SSE stream reaches response.completed.
func TestLimitWriteTimeoutLongStream(t *testing.T) {
	base := limitServer(t, "-write-timeout", "1s", "-model-speed", "65")
	for _, c := range []struct{ path, body, last string }{
		{"/v1/chat/completions", `{"model":"sim","stream":true,"messages":[{"role":"user","content":"long"}],"metadata":{"sim.answer_tokens":"200"}}`, "data: [DONE]"},
		{"/v1/responses", `{"model":"sim","stream":true,"input":"long","metadata":{"sim.answer_tokens":"200"}}`, "event: response.completed"},
	} {
		start := time.Now()
		resp, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), c.last) {
			t.Fatalf("%s after %s: %d %v, no %q at the end:\n…%s", c.path, took, resp.StatusCode, err, c.last, b[max(0, len(b)-300):])
		}
		if took < 2*time.Second {
			t.Fatalf("%s took %s: the stream should outlast the write timeout twice", c.path, took)
		}
		if c.path == "/v1/chat/completions" && !strings.Contains(string(b), `"finish_reason":"stop"`) {
			t.Fatalf("chat stream without its finish chunk")
		}
	}
}

// The routes that read a body, each with a valid small body.
var bodyRoutes = []struct{ path, body string }{
	{"/v1/responses", `{"model":"sim","input":"hi"}`},
	{"/v1/chat/completions", `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`},
	{"/v1/responses/compact", `{"model":"sim","input":"hi"}`},
}

// TestLimitMaxFrame: -max-frame bounds the body of every route that reads one (413 from the
// Content-Length, before the body is read).
func TestLimitMaxFrame(t *testing.T) {
	base := limitServer(t, "-max-frame", "64KiB")
	for _, r := range bodyRoutes {
		c := rawPost(t, base, r.path, 100<<10, "")
		if code, body := readStatus(t, c); code != 413 || !strings.Contains(body, "request_body_too_large") {
			t.Fatalf("%s over -max-frame: %d %s", r.path, code, body)
		}
		if code, m := call(t, "POST", base+r.path, "", r.body); code != 200 {
			t.Fatalf("%s within -max-frame: %d %v", r.path, code, m)
		}
	}
}

// slotBytes is the bytes the chat completion slots keep (GET /slots n_bytes), which
// -max-memory counts as long as they keep them.
func slotBytes(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var slots []struct {
		Bytes float64 `json:"n_bytes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&slots); err != nil {
		t.Fatalf("GET /slots: %v", err)
	}
	var n float64
	for _, s := range slots {
		n += s.Bytes
	}
	return n
}

// TestLimitMaxMemory: a body in progress on any route holds 4 × its Content-Length of
// -max-memory, so that another request is refused 503 server_overloaded until it is gone.
// The stalled body takes what the chat slots' kept contexts leave of the budget.
func TestLimitMaxMemory(t *testing.T) {
	base := limitServer(t, "-max-frame", "1MiB", "-max-memory", "4MiB")
	for _, r := range bodyRoutes {
		kept := slotBytes(t, base)
		n := int((4<<20 - kept) / 4) // 4 bytes of budget per byte of body (session.DecodeFactor)
		stalled := rawPost(t, base, r.path, n, `{"model":"sim",`)
		waitUntil(t, r.path+" holding the budget", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") >= kept+float64(4*n) })
		for _, v := range bodyRoutes {
			if code, m := call(t, "POST", base+v.path, "", v.body); code != 503 || errCode(m) != "server_overloaded" {
				t.Fatalf("%s while %s holds the budget: %d %v", v.path, r.path, code, m)
			}
		}
		overloadedAnswer(t, base+bodyRoutes[0].path, bodyRoutes[0].body)
		stalled.Close()
		waitUntil(t, "the budget released", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") == slotBytes(t, base) })
		for _, v := range bodyRoutes {
			if code, m := call(t, "POST", base+v.path, "", v.body); code != 200 {
				t.Fatalf("%s after the budget was released: %d %v", v.path, code, m)
			}
		}
	}
}

// TestLimitMaxDecoding: with -max-decoding 1 a body in progress on any route holds the one
// decoding slot (503 for the others); POSTs that sent only their headers hold nothing.
func TestLimitMaxDecoding(t *testing.T) {
	base := limitServer(t, "-max-decoding", "1")
	for range 5 {
		rawPost(t, base, "/v1/chat/completions", 100, "") // headers only: no slot taken
	}
	for _, r := range bodyRoutes {
		stalled := rawPost(t, base, r.path, 1000, `{"model":"sim",`)
		waitUntil(t, r.path+" holding the slot", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") > slotBytes(t, base) })
		for _, v := range bodyRoutes {
			if code, m := call(t, "POST", base+v.path, "", v.body); code != 503 || errCode(m) != "server_overloaded" {
				t.Fatalf("%s while %s is being read: %d %v", v.path, r.path, code, m)
			}
		}
		stalled.Close()
		waitUntil(t, "the slot released", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") == slotBytes(t, base) })
		for _, v := range bodyRoutes {
			if code, m := call(t, "POST", base+v.path, "", v.body); code != 200 {
				t.Fatalf("%s after the slot was released: %d %v", v.path, code, m)
			}
		}
	}
}

// TestLimitReadTimeout: -read-timeout bounds the wait for a body's first byte and the
// reading of the rest, on every route that reads one: 408 request_timeout.
func TestLimitReadTimeout(t *testing.T) {
	base := limitServer(t, "-read-timeout", "1s")
	for _, r := range bodyRoutes {
		for _, part := range []string{"", `{"model":"sim",`} {
			start := time.Now()
			c := rawPost(t, base, r.path, 1000, part)
			if code, body := readStatus(t, c); code != 408 || !strings.Contains(body, "request_timeout") {
				t.Fatalf("%s with %q of its body: %d %s", r.path, part, code, body)
			}
			if d := time.Since(start); d < time.Second {
				t.Fatalf("%s answered 408 after %s, before -read-timeout", r.path, d)
			}
		}
	}
}

// longChat starts a streamed chat completion for key that samples for a long time, and
// returns once its first delta has come; the returned function ends it.
func longChat(t *testing.T, base, key string) (stop func()) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(
		`{"model":"sim","stream":true,"messages":[{"role":"user","content":"long"}],"metadata":{"sim.answer_tokens":"100000","sim.speed":"65"}}`))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("long chat: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"content"`) {
	}
	return func() { resp.Body.Close() }
}

// TestLimitMaxSampling: with -max-sampling 1 a chat completion waits while a rollout samples
// (tether_sampling_waiting), and runs once it ends.
func TestLimitMaxSampling(t *testing.T) {
	base := limitServer(t, "-max-sampling", "1")
	stop := longChat(t, base, "")
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(bodyRoutes[1].body))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitUntil(t, "the second chat waiting", func() bool { return metric(t, base, "", "tether_sampling_waiting") == 1 })
	select {
	case code := <-done:
		t.Fatalf("the second chat ran past -max-sampling 1: %d", code)
	default:
	}
	stop()
	if code := <-done; code != 200 {
		t.Fatalf("the second chat after the first ended: %d", code)
	}
}

// TestLimitKeyRollouts: with -key-rollouts 1 a key's running chat completion is its live
// rollout: its second request gets 429 quota_exceeded, another key's runs.
func TestLimitKeyRollouts(t *testing.T) {
	base := limitServer(t, "-api-keys", keysFile(t, "key-a", "key-b"), "-key-rollouts", "1")
	stop := longChat(t, base, "key-b")
	defer stop()
	for _, r := range []struct{ path, body string }{bodyRoutes[0], bodyRoutes[1]} {
		if code, m := call(t, "POST", base+r.path, "key-b", r.body); code != 429 || errCode(m) != "quota_exceeded" {
			t.Fatalf("key B's %s past its quota: %d %v", r.path, code, m)
		}
		if code, m := call(t, "POST", base+r.path, "key-a", r.body); code != 200 {
			t.Fatalf("key A's %s: %d %v", r.path, code, m)
		}
	}
}

// TestLimitMaxRolloutBytes: -max-rollout-bytes refuses a create whose items are larger.
func TestLimitMaxRolloutBytes(t *testing.T) {
	base := limitServer(t, "-max-rollout-bytes", "64KiB")
	b, _ := json.Marshal(map[string]any{"model": "sim", "input": strings.Repeat("x", 100<<10)})
	if code, m := call(t, "POST", base+"/v1/responses", "", string(b)); code != 400 || errCode(m) != "rollout_too_large" {
		t.Fatalf("a create over -max-rollout-bytes: %d %v", code, m)
	}
}

// TestLimitStoredGetCounted: GET of a large stored response counts its encoding in
// -max-memory while it is written: a client that does not read holds it, and a second GET is
// refused 503 server_overloaded until the first connection is gone. The sim has no context
// window here: the 7 MiB of instructions are 1.8M tokens, past the default -model-context.
func TestLimitStoredGetCounted(t *testing.T) {
	base := limitServer(t, "-max-frame", "8MiB", "-max-memory", "40MiB", "-model-speed", "instant", "-model-context", "0")
	b, _ := json.Marshal(map[string]any{"model": "sim", "input": "x", "store": true, "instructions": strings.Repeat("i", 7<<20)})
	code, m := call(t, "POST", base+"/v1/responses", "", string(b))
	if code != 200 {
		t.Fatalf("stored create: %d", code)
	}
	id := m["id"].(string)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(c, "GET /v1/responses/%s HTTP/1.1\r\nHost: x\r\n\r\n", id) // never read
	waitUntil(t, "the unread GET counted", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") >= 4*7<<20 })
	if code, m := call(t, "GET", base+"/v1/responses/"+id, "", ""); code != 503 || errCode(m) != "server_overloaded" {
		t.Fatalf("a second GET while the first is unread: %d %v", code, errCode(m))
	}
	c.Close()
	waitUntil(t, "the GET's reservation released", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") == 0 })
	if code, _ := call(t, "GET", base+"/v1/responses/"+id, "", ""); code != 200 {
		t.Fatalf("GET after the unread one ended: %d", code)
	}
}

// TestLimitSlowloris: with -max-http-connections 8, forty connections trickling headers
// they never finish (no key needed) hold nothing: /healthz and a create are still served.
func TestLimitSlowloris(t *testing.T) {
	base := limitServer(t, "-max-http-connections", "8")
	addr := strings.TrimPrefix(base, "http://")
	for range 40 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprint(c, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nX-Slow: a"); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if code, m := call(t, "GET", base+"/healthz", "", ""); code != 200 {
			t.Fatalf("/healthz among unfinished headers: %d %v", code, m)
		}
		if code, m := call(t, "POST", base+"/v1/responses", "", bodyRoutes[0].body); code != 200 {
			t.Fatalf("a create among unfinished headers: %d %v", code, m)
		}
	}
}

// imageOutputCreate is a create whose input is a function call and its output given as an
// array of parts: one input_image of about size bytes (a data URL).
func imageOutputCreate(size int, store bool) string {
	url := "data:image/png;base64," + strings.Repeat("A", size)
	b, _ := json.Marshal(map[string]any{"model": "sim", "store": store, "input": []any{
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": []any{
			map[string]any{"type": "input_image", "image_url": url},
		}},
	}})
	return string(b)
}

// TestLimitRolloutBytesOutputParts: a function_call_output whose output is an array of parts
// counts toward -max-rollout-bytes by its parts' size.
func TestLimitRolloutBytesOutputParts(t *testing.T) {
	base := limitServer(t, "-max-rollout-bytes", "64KiB")
	if code, m := call(t, "POST", base+"/v1/responses", "", imageOutputCreate(100<<10, false)); code != 400 || errCode(m) != "rollout_too_large" {
		t.Fatalf("a create with a 100 KiB image output over -max-rollout-bytes 64KiB: %d %v", code, m)
	}
	if code, m := call(t, "POST", base+"/v1/responses", "", imageOutputCreate(10<<10, false)); code != 200 {
		t.Fatalf("a create with a 10 KiB image output: %d %v", code, m)
	}
}

// TestLimitStoreBytesOutputParts: sixty stored responses, each holding a 64 KiB image as a
// function_call_output's part, are evicted by their size under -store-bytes 1MiB: at most 16
// are kept, the newest.
func TestLimitStoreBytesOutputParts(t *testing.T) {
	base := limitServer(t, "-store-bytes", "1MiB")
	var ids []string
	for range 60 {
		code, m := call(t, "POST", base+"/v1/responses", "", imageOutputCreate(64<<10, true))
		if code != 200 || m["status"] != "completed" {
			t.Fatalf("stored create: %d %v", code, m)
		}
		ids = append(ids, m["id"].(string))
	}
	kept := stored(t, base, "", ids)
	n := 0
	for _, k := range kept {
		if k {
			n++
		}
	}
	if n == 0 || n > 16 || !kept[59] || kept[0] {
		t.Fatalf("kept %d of 60 (%v): want at most 16 (1 MiB / 64 KiB), the newest", n, kept)
	}
}

// TestLimitQueuedWritesCounted: frames queued to a WebSocket client that does not read count
// in -max-memory (tether_memory_budget_bytes) until -write-timeout drops the client; the
// gauge then falls back to 0, and other clients are served meanwhile.
func TestLimitQueuedWritesCounted(t *testing.T) {
	base := limitServer(t, "-write-timeout", "2s", "-max-frame", "8MiB", "-max-memory", "256MiB")
	const size = 6 << 20
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10) // and never read
		}
		return c, err
	}}}
	defer hc.CloseIdleConnections()
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// Every event of the response echoes its instructions: response.created alone is 6 MiB.
	b, _ := json.Marshal(map[string]any{"type": "response.create", "model": "sim", "input": "x", "instructions": strings.Repeat("i", size)})
	if err := ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	// The rollout's settings (6 MiB) and the queued response.created (6 MiB).
	waitUntil(t, "the queued frame counted", func() bool { return metric(t, base, "", "tether_memory_budget_bytes") >= 2*size })
	if code, m := call(t, "POST", base+"/v1/responses", "", `{"model":"sim","input":"hi"}`); code != 200 {
		t.Fatalf("another client while one does not read: %d %v", code, m)
	}
	waitUntil(t, "the client dropped and the budget back to 0", func() bool {
		return metric(t, base, "", "tether_peers_dropped_total") == 1 && metric(t, base, "", "tether_memory_budget_bytes") == 0
	})
}

// keyPost opens a connection and sends the headers of a POST /v1/responses with key
// (Content-Length n) and the first part of its body.
func keyPost(t *testing.T, base, key string, n int, part string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", key, n, part); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLimitKeyShareDecoding: with -max-decoding 4 and -key-share 0.5, key B's stalled bodies
// hold at most 2 slots (B's third: 503 server_overloaded at once), and key A's POSTs go
// through; with -key-share 0, B's third takes a slot.
func TestLimitKeyShareDecoding(t *testing.T) {
	for _, share := range []string{"0.5", "0"} {
		base := limitServer(t, "-api-keys", keysFile(t, "key-a", "key-b"), "-max-decoding", "4", "-key-share", share,
			"-metrics-key-file", keysFile(t, "scraper"))
		for i := range 2 {
			keyPost(t, base, "key-b", 1000, `{"model":"sim",`)
			waitUntil(t, "B's bodies holding slots", func() bool {
				return metric(t, base, "scraper", "tether_memory_budget_bytes") >= float64((i+1)*4000)
			})
		}
		third := keyPost(t, base, "key-b", 1000, `{"model":"sim",`)
		if share == "0" {
			waitUntil(t, "B's third body holding a slot", func() bool {
				return metric(t, base, "scraper", "tether_memory_budget_bytes") >= 3*4000
			})
			continue
		}
		if code, body := readStatus(t, third); code != 503 || !strings.Contains(body, "server_overloaded") {
			t.Fatalf("B's third POST past its share: %d %s", code, body)
		}
		for range 3 {
			if code, m := call(t, "POST", base+"/v1/responses", "key-a", bodyRoutes[0].body); code != 200 {
				t.Fatalf("A's POST while B holds its share: %d %v", code, m)
			}
		}
	}
}

// TestLimitKeyShareChatSlots: with -slots 2, key B's two long chat completions hold both
// slots and two more of B's wait; A's completion, arriving last, takes the first slot B
// releases and ends before B's waiting ones.
func TestLimitKeyShareChatSlots(t *testing.T) {
	base := limitServer(t, "-api-keys", keysFile(t, "key-a", "key-b"), "-slots", "2", "-metrics-key-file", keysFile(t, "scraper"))
	stop1 := longChat(t, base, "key-b")
	stop2 := longChat(t, base, "key-b")
	defer stop2()
	done := make(chan string, 3)
	short := func(key string) {
		go func() {
			req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(bodyRoutes[1].body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- key + ": " + err.Error()
				return
			}
			resp.Body.Close()
			done <- fmt.Sprint(key, " ", resp.StatusCode)
		}()
	}
	short("key-b")
	short("key-b")
	waitUntil(t, "B's two short chats waiting", func() bool { return metric(t, base, "scraper", "tether_chat_slots_waiting") == 2 })
	short("key-a")
	waitUntil(t, "A's chat waiting", func() bool { return metric(t, base, "scraper", "tether_chat_slots_waiting") == 3 })
	stop1()
	if got := <-done; got != "key-a 200" {
		t.Fatalf("first chat to end after B released a slot: %q, want A's", got)
	}
	for range 2 {
		if got := <-done; got != "key-b 200" {
			t.Fatalf("B's waiting chat: %q", got)
		}
	}
}

// TestLimitMetricsAccess: an API key cannot read /metrics (and its budget gauges): 403
// permission_denied when no metrics access is configured; the -metrics-key-file key reads
// it; with -metrics-addr a listener of its own (loopback for a port alone) serves it and the
// main listener refuses it to API keys.
func TestLimitMetricsAccess(t *testing.T) {
	forbidden := func(t *testing.T, base, key string) {
		t.Helper()
		if code, m := call(t, "GET", base+"/metrics", key, ""); code != 403 || errCode(m) != "permission_denied" {
			t.Fatalf("/metrics with %q: %d %v, want 403 permission_denied", key, code, m)
		}
	}
	t.Run("keys only", func(t *testing.T) {
		base := limitServer(t, "-api-keys", keysFile(t, "key-a"))
		if code, m := call(t, "GET", base+"/metrics", "", ""); code != 401 || errCode(m) != "invalid_api_key" {
			t.Fatalf("/metrics without a key: %d %v", code, m)
		}
		forbidden(t, base, "key-a")
	})
	t.Run("metrics key", func(t *testing.T) {
		base := limitServer(t, "-api-keys", keysFile(t, "key-a"), "-metrics-key-file", keysFile(t, "scraper"))
		forbidden(t, base, "key-a")
		if code, m := call(t, "GET", base+"/metrics", "wrong", ""); code != 401 || errCode(m) != "invalid_api_key" {
			t.Fatalf("/metrics with a wrong key: %d %v", code, m)
		}
		if v := metric(t, base, "scraper", "tether_memory_budget_bytes"); v != 0 {
			t.Fatalf("idle budget %v", v)
		}
	})
	t.Run("metrics listener", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		base := limitServer(t, "-api-keys", keysFile(t, "key-a"), "-metrics-addr", port)
		forbidden(t, base, "key-a")
		mbase := "http://127.0.0.1:" + port
		if v := metric(t, mbase, "", "tether_memory_budget_bytes"); v != 0 {
			t.Fatalf("idle budget %v", v)
		}
		if code, m := call(t, "POST", mbase+"/v1/responses", "key-a", `{"model":"sim","input":"hi"}`); code != 404 || errCode(m) != "not_found" {
			t.Fatalf("POST /v1/responses on the metrics listener: %d %v", code, m)
		}
	})
}

// TestLimitWebSocketCost: an open WebSocket holds server.WebSocketCost of -max-memory from
// its upgrade to its close, so that idle connections fill the budget: at -max-memory 1MiB,
// sixteen idle connections hold all of it, the seventeenth upgrade gets 503
// server_overloaded, and closing one makes room for another.
func TestLimitWebSocketCost(t *testing.T) {
	base := limitServer(t, "-max-frame", "64KiB", "-max-memory", "1MiB")
	const fit = (1 << 20) / server.WebSocketCost
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/responses"
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	for i := range fit {
		c, _, err := websocket.Dial(t.Context(), url, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		conns = append(conns, c)
	}
	waitUntil(t, "every connection counted", func() bool {
		return metric(t, base, "", "tether_memory_budget_bytes") == fit*server.WebSocketCost
	})
	refused := func() {
		t.Helper()
		_, resp, err := websocket.Dial(t.Context(), url, nil)
		if err == nil || resp == nil || resp.StatusCode != 503 {
			t.Fatalf("an upgrade over the budget: %v %v", resp, err)
		}
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if errCode(m) != "server_overloaded" {
			t.Fatalf("an upgrade over the budget: %v", m)
		}
	}
	refused()
	if code, m := call(t, "GET", base+"/healthz", "", ""); code != 200 {
		t.Fatalf("/healthz with the budget full: %d %v", code, m)
	}
	conns[0].Close(websocket.StatusNormalClosure, "")
	conns = conns[1:]
	waitUntil(t, "the closed connection released", func() bool {
		return metric(t, base, "", "tether_memory_budget_bytes") == (fit-1)*server.WebSocketCost
	})
	c, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatalf("an upgrade after a close: %v", err)
	}
	conns = append(conns, c)
	refused()
}
