package chat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/chat"
	"github.com/tetherd/tether/sampler/sim"
)

// proxy is a small reverse proxy in front of a real upstream Tether: it records each chat
// request's body and injects the fault its mode names ("" forwards).
type proxy struct {
	mu      sync.Mutex
	bodies  []chatwire.Request
	aborted int // forwarded requests whose client went away before the upstream finished
	left    int // held requests (mode nodone) whose client went away
	mode    string
	next    *httputil.ReverseProxy
	conns   int           // connections Tether opened to the proxy
	pause   time.Duration // mode trickle: the pause between the pieces of the first event
	relay   trickled      // mode trickle: how the last trickled event went out
}

// trickled is how a trickled event went out, as far as it did: from the request's arrival,
// the time to the upstream's first bytes (first) and to the event's first piece (lead); the
// pieces written; the longest time between two of them (gap); the time from the first to the
// last, once all went out (took).
type trickled struct {
	first, lead, gap, took time.Duration
	pieces                 int
}

// connState counts the connections Tether opens (http.Server.ConnState).
func (p *proxy) connState(_ net.Conn, st http.ConnState) {
	if st == http.StateNew {
		p.mu.Lock()
		p.conns++
		p.mu.Unlock()
	}
}

func (p *proxy) connCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

func (p *proxy) setMode(m string) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
}

func (p *proxy) abortedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.aborted
}

func (p *proxy) leftCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left
}

func (p *proxy) requests() []chatwire.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chatwire.Request(nil), p.bodies...)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") { // e.g. the slot check's GET /props
		p.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req chatwire.Request
	_ = json.Unmarshal(body, &req)
	p.mu.Lock()
	p.bodies = append(p.bodies, req)
	mode := p.mode
	p.mu.Unlock()
	sse := func() {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\n")
		http.NewResponseController(w).Flush()
	}
	switch mode {
	case "500":
		http.Error(w, `{"error":{"message":"engine exploded","type":"server_error"}}`, http.StatusInternalServerError)
	case "401":
		http.Error(w, `{"error":{"message":"Incorrect API key provided: sk-upstream-secret","type":"invalid_request_error"}}`, http.StatusUnauthorized)
	case "404":
		http.Error(w, `{"error":{"message":"The model 'gpt-x' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, http.StatusNotFound)
	case "400":
		http.Error(w, `{"error":{"message":"the request exceeds the available context size","type":"invalid_request_error"}}`, http.StatusBadRequest)
	case "ctx": // OpenAI's answer to a prompt over the model's context window
		http.Error(w, `{"error":{"message":"This model's maximum context length is 128 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, http.StatusBadRequest)
	case "vllmctx": // vLLM's answer to a prompt (and completion) over its max_model_len
		http.Error(w, `{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 2113 tokens (2049 in the messages, 64 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`, http.StatusBadRequest)
	case "cut": // the engine dies mid-answer: its connection closes inside the chunked body
		sse()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	case "404path": // a path the upstream does not serve (Go's answer)
		http.Error(w, "404 page not found", http.StatusNotFound)
	case "json": // an engine that ignores "stream": true and answers one chat.completion
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	case "html": // an -upstream URL that is a web page, not the engine's API
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body>Welcome</body></html>")
	case "stall":
		sse()
		<-r.Context().Done()
	case "malformed":
		sse()
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":\n\n")
	case "eof":
		sse()
	case "nodone":
		// The upstream's real stream without its [DONE], the connection kept open until the
		// client goes away.
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.forward(&dropWriter{ResponseWriter: w}, r)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		p.mu.Lock()
		p.left++
		p.mu.Unlock()
	case "trickle":
		// The upstream's real stream, its first event in trickleParts pieces, pause apart.
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.note(func(tr *trickled) { *tr = trickled{} })
		p.forward(&trickleWriter{ResponseWriter: w, pause: p.trickle(), arrived: time.Now(), p: p}, r)
	case "nousage":
		// The upstream's real stream without its usage chunk and [DONE], then its end.
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.forward(&dropWriter{ResponseWriter: w, usage: true}, r)
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.forward(w, r)
	}
}

// dropWriter passes an SSE stream on without its data: [DONE] event and, with usage, without
// the events carrying usage.
type dropWriter struct {
	http.ResponseWriter
	usage bool
	buf   []byte
}

func (w *dropWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.Index(w.buf, []byte("\n\n"))
		if i < 0 {
			return len(b), nil
		}
		ev := w.buf[:i+2]
		w.buf = w.buf[i+2:]
		if bytes.HasPrefix(ev, []byte("data: [DONE]")) || w.usage && bytes.Contains(ev, []byte(`"usage":{`)) {
			continue
		}
		if _, err := w.ResponseWriter.Write(ev); err != nil {
			return 0, err
		}
	}
}

func (w *dropWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// setTrickle sets the mode trickle, with pause between the pieces of the first event.
func (p *proxy) setTrickle(pause time.Duration) {
	p.mu.Lock()
	p.mode, p.pause = "trickle", pause
	p.mu.Unlock()
}

// trickle returns the pause between the pieces of a trickled event.
func (p *proxy) trickle() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pause
}

// trickledLast returns how the last trickled event went out, so far.
func (p *proxy) trickledLast() trickled {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.relay
}

// note updates the record of the trickled event.
func (p *proxy) note(fn func(*trickled)) {
	p.mu.Lock()
	fn(&p.relay)
	p.mu.Unlock()
}

// trickleParts is the number of pieces a trickled event is written in.
const trickleParts = 12

// trickleWriter passes an SSE stream on, its first event in trickleParts pieces that are each
// flushed, pause apart, noting on p how that event goes out.
type trickleWriter struct {
	http.ResponseWriter
	pause   time.Duration
	arrived time.Time // the request's arrival
	p       *proxy
	buf     []byte
	done    bool // the first event went out
}

func (w *trickleWriter) Write(b []byte) (int, error) {
	if w.done {
		return w.ResponseWriter.Write(b)
	}
	if len(w.buf) == 0 {
		w.p.note(func(tr *trickled) { tr.first = time.Since(w.arrived) })
	}
	w.buf = append(w.buf, b...)
	i := bytes.Index(w.buf, []byte("\n\n"))
	if i < 0 {
		return len(b), nil
	}
	ev, rest := w.buf[:i+2], w.buf[i+2:]
	w.done = true
	start := time.Now()
	size := (len(ev) + trickleParts - 1) / trickleParts
	for last := start; len(ev) > 0; {
		k := min(size, len(ev))
		if _, err := w.ResponseWriter.Write(ev[:k]); err != nil {
			return 0, err
		}
		w.Flush()
		now := time.Now()
		w.p.note(func(tr *trickled) {
			if tr.pieces++; tr.pieces == 1 {
				tr.lead = now.Sub(w.arrived)
			}
			tr.gap = max(tr.gap, now.Sub(last))
		})
		last = now
		if ev = ev[k:]; len(ev) > 0 {
			time.Sleep(w.pause)
		}
	}
	w.p.note(func(tr *trickled) { tr.took = time.Since(start) })
	if _, err := w.ResponseWriter.Write(rest); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *trickleWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// forward passes the request to the upstream and counts it aborted when its client went away
// first (ReverseProxy then panics with http.ErrAbortHandler, or returns with the context done).
func (p *proxy) forward(w http.ResponseWriter, r *http.Request) {
	defer func() {
		v := recover()
		if v != nil || r.Context().Err() != nil {
			p.mu.Lock()
			p.aborted++
			p.mu.Unlock()
		}
		if v != nil {
			panic(v)
		}
	}()
	p.next.ServeHTTP(w, r)
}

// chain starts a sim Tether as the upstream, the proxy in front of it, and a front Tether with
// the chat backend over the proxy. It returns the front's base URL, its model and the proxy.
func chain(t *testing.T, opts chat.Options) (string, *chat.Model, *proxy) {
	t.Helper()
	_, up := servertest.Start(t, server.Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true})})
	u, _ := url.Parse(up)
	p := &proxy{next: httputil.NewSingleHostReverseProxy(u)}
	p.next.FlushInterval = -1
	ps := httptest.NewUnstartedServer(p)
	ps.Config.ConnState = p.connState
	ps.Start()
	t.Cleanup(ps.Close)
	if len(opts.BaseURLs) == 0 {
		opts.BaseURLs = []string{ps.URL + "/v1"}
	}
	m := newModel(t, opts)
	_, front := servertest.Start(t, server.Options{Model: m})
	return front, m, p
}

// newModel returns chat.New(opts), failing t on an error.
func newModel(t *testing.T, opts chat.Options) *chat.Model {
	t.Helper()
	m, err := chat.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func dialAppend(t *testing.T, base string) *wstest.Client {
	h := http.Header{}
	h.Add("OpenAI-Beta", server.AppendBeta)
	return wstest.Dial(t, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", h)
}

var weather = map[string]any{"type": "function", "name": "get_weather", "strict": true, "parameters": map[string]any{
	"type": "object", "required": []string{"location"}, "additionalProperties": false,
	"properties": map[string]any{"location": map[string]any{"type": "string"}}}}

// TestChainHotTurn runs a tool rollout on the append shape through the chain: the second turn
// sends the converted call and its output on the same pinned slot, reports the upstream's
// cached tokens, and the slot is released when the rollout ends.
func TestChainHotTurn(t *testing.T) {
	front, m, p := chain(t, chat.Options{Slots: 2})
	c := dialAppend(t, front)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "instructions": "be brief",
		"input": "weather in Paris", "tools": []any{weather}})
	fs := c.Until("response.done", "response.failed", "response.completed")
	done := fs[len(fs)-1]
	if done.Type() != "response.done" || m.Pinned() != 1 {
		t.Fatalf("first step ended %s (%v), %d slots pinned", done.Type(), done, m.Pinned())
	}
	var callID, args string
	for _, f := range fs {
		if f.Type() == "response.output_item.done" {
			callID, args = f.Str("item", "call_id"), f.Str("item", "arguments")
		}
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"),
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "sunny"}}})
	fs = c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" {
		t.Fatalf("rollout ended %s: %v", last.Type(), last)
	}
	in, cached := last.Num("response", "usage", "input_tokens"), last.Num("response", "usage", "input_tokens_details", "cached_tokens")
	if cached <= 0 || cached >= in {
		t.Fatalf("usage %v: want the upstream's cached tokens of the hot turn", last.Get("response", "usage"))
	}

	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2", len(reqs))
	}
	r1, r2 := reqs[0], reqs[1]
	if r1.IDSlot == nil || r2.IDSlot == nil || *r1.IDSlot != *r2.IDSlot || r2.CachePrompt == nil || !*r2.CachePrompt {
		t.Fatalf("slot pinning: id_slot %v then %v, cache_prompt %v", r1.IDSlot, r2.IDSlot, r2.CachePrompt)
	}
	if !r2.Stream || r2.StreamOptions == nil || !r2.StreamOptions.IncludeUsage || len(r2.Tools) != 1 || r2.Tools[0].Function.Name != "get_weather" {
		t.Fatalf("second request settings: %+v", r2)
	}
	want := []string{`system:"be brief"`, `user:"weather in Paris"`, `assistant:null:` + callID + ` get_weather ` + args, `tool:"sunny":` + callID}
	if got := describe(r2.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("second request messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := describe(r1.Messages); len(got) != 2 || got[1] != want[1] {
		t.Fatalf("first request messages: %v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Pinned() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if m.Pinned() != 0 {
		t.Fatalf("%d slots still pinned after the rollout ended", m.Pinned())
	}
}

// describe renders messages as "role:content[:tool_call_id]" or, for tool calls,
// "role:content:id name arguments".
func describe(msgs []chatwire.Message) []string {
	var out []string
	for _, m := range msgs {
		s := m.Role + ":" + string(m.Content)
		for _, tc := range m.ToolCalls {
			s += ":" + tc.ID + " " + tc.Function.Name + " " + tc.Function.Arguments
		}
		if m.ToolCallID != "" {
			s += ":" + m.ToolCallID
		}
		out = append(out, s)
	}
	return out
}

// TestSlowEventIsNotSilence: an event whose bytes keep coming, but which takes longer than the
// silence timeout to arrive whole, is waited for: the timeout counts from the last bytes
// received, and the response completes. The timeout is long because it also covers the
// upstream's first byte, which took over 2 s once on the loaded machine.
func TestSlowEventIsNotSilence(t *testing.T) {
	const timeout = 4 * time.Second
	front, _, p := chain(t, chat.Options{Timeout: timeout})
	p.setTrickle(timeout / 8) // 11 pauses: 1.375 timeouts or more
	r := post(t, front)
	tr := p.trickledLast()
	if r.Status != "completed" {
		t.Fatalf("status %s, error %+v; want the slow event waited for (the upstream's first bytes %v after the request, the event's first piece %v after it, %d pieces out, %v between pieces at most)",
			r.Status, r.Error, tr.first, tr.lead, tr.pieces, tr.gap)
	}
	if tr.took <= timeout {
		t.Fatalf("the trickled event took %v, not more than the timeout %v", tr.took, timeout)
	}
}

// TestChainFailures: each upstream fault ends the response failed with a message naming the
// cause; the front keeps serving. The upstream timeout is what the stall waits for; shorter
// ones (300 ms) failed the healthy request at the end on a loaded machine, where the
// upstream Tether can take that long to send its first byte.
func TestChainFailures(t *testing.T) {
	front, _, p := chain(t, chat.Options{Timeout: 3 * time.Second})
	for _, tc := range []struct{ mode, code, says string }{
		{"500", "server_error", "HTTP 500"},
		{"401", "server_error", "HTTP 401"},
		{"400", "invalid_prompt", "exceeds the available context size"},
		{"ctx", "context_length_exceeded", "maximum context length is 128 tokens"},
		{"vllmctx", "context_length_exceeded", "maximum context length is 2048 tokens. However, you requested 2113 tokens"},
		{"404", "model_not_found", "does not serve this model"},
		{"404path", "server_error", "/v1/chat/completions (HTTP 404: 404 page not found): -upstream must be the engine's OpenAI-compatible API base"},
		{"stall", "server_error", "sent nothing"},
		{"json", "server_error", `Content-Type application/json, no SSE event; it began "{\"id\":\"x\",\"object\":\"chat.completion\"`},
		{"html", "server_error", `is not a Chat Completions stream (HTTP 200, Content-Type text/html, no SSE event; it began "<html>`},
		{"malformed", "server_error", "malformed chunk"},
		{"eof", "server_error", "without a finish_reason"},
		{"cut", "server_error", "the upstream engine's stream broke off mid-answer (unexpected EOF)"},
		{"", "", ""},
	} {
		p.setMode(tc.mode)
		r := post(t, front)
		if tc.mode == "" {
			if r.Status != "completed" {
				t.Fatalf("after the faults: %+v", r)
			}
			continue
		}
		if r.Status != "failed" || r.Error == nil || r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.says) {
			t.Errorf("%s: status %s, error %+v; want failed %s naming %q", tc.mode, r.Status, r.Error, tc.code, tc.says)
		}
		if r.Error != nil && strings.Contains(r.Error.Message, "sk-upstream-secret") {
			t.Errorf("%s: the upstream's message with a key is echoed: %s", tc.mode, r.Error.Message)
		}
	}
}

// TestChainEndsAtUsage: a stream that sent its finish chunk and its usage chunk but neither
// [DONE] nor its end ends the step at the usage chunk (completed, with the upstream's usage)
// long before -upstream-timeout, and Tether closes the stream; a stream that ends after its
// finish chunk without usage completes as before, with usage 0.
func TestChainEndsAtUsage(t *testing.T) {
	const timeout = 20 * time.Second
	front, _, p := chain(t, chat.Options{Timeout: timeout})
	p.setMode("nodone")
	start := time.Now()
	r := post(t, front)
	if took := time.Since(start); r.Status != "completed" || took >= timeout {
		t.Fatalf("without [DONE]: %s %+v after %v", r.Status, r.Error, took)
	}
	if r.Usage.InputTokens <= 0 || r.Usage.OutputTokens <= 0 {
		t.Fatalf("without [DONE]: usage %+v, want the upstream's", r.Usage)
	}
	eventually(t, "Tether closed the held stream", func() bool { return p.leftCount() == 1 })

	p.setMode("nousage")
	r = post(t, front)
	if r.Status != "completed" || r.Usage.InputTokens != 0 || r.Usage.OutputTokens != 0 {
		t.Fatalf("without usage: %s %+v usage %+v", r.Status, r.Error, r.Usage)
	}
}

// TestChainReusesConnections: steps one after another go over one kept-alive connection to
// the engine (no new TCP connection, or TLS handshake, per step), whether the stream ended with
// [DONE] or at the usage chunk of an engine that holds the stream open.
func TestChainReusesConnections(t *testing.T) {
	front, _, p := chain(t, chat.Options{})
	for i := range 4 {
		if r := post(t, front); r.Status != "completed" {
			t.Fatalf("step %d: %s %+v", i, r.Status, r.Error)
		}
	}
	if n := p.connCount(); n != 1 {
		t.Fatalf("4 steps opened %d connections to the engine, want 1", n)
	}
}

func TestChainRefused(t *testing.T) {
	addr := refusedAddr(t)
	front, _, _ := chain(t, chat.Options{BaseURLs: []string{"http://" + addr + "/v1"}})
	r := post(t, front)
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" || !strings.Contains(r.Error.Message, "upstream request failed") {
		t.Fatalf("refused upstream: %+v %+v", r, r.Error)
	}
}

type result struct {
	Status string
	Error  *struct{ Code, Message string }
	Usage  struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
}

// post creates a response over HTTP (not stored) and decodes it.
func post(t *testing.T, base string) result {
	t.Helper()
	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"sim","input":"hello","store":false}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}
