package responses_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/responses"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// upstream starts a real Tether (sim model in real time, so sim.speed slows it down) as the
// upstream and returns its base URL ("http://127.0.0.1:PORT").
func upstream(t *testing.T, opts server.Options) string {
	t.Helper()
	opts.Model = sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant, Realtime: true})
	_, url := servertest.Start(t, opts)
	return url
}

// front starts a Tether whose model is the responses backend on upURL (an http base URL or a
// ws URL) and returns its base URL.
func front(t *testing.T, upURL string, timeout time.Duration) string {
	t.Helper()
	_, url := startFront(t, server.Options{Model: newModel(t, upURL, timeout)})
	return url
}

// newModel returns the responses backend on upURL.
func newModel(t *testing.T, upURL string, timeout time.Duration) *responses.Model {
	t.Helper()
	m, err := responses.New(responses.Options{URL: upURL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// startFront starts the front Tether.
func startFront(t *testing.T, opts server.Options) (*server.Server, string) {
	t.Helper()
	return servertest.Start(t, opts)
}

func wsURL(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/v1/responses" }

// appendHeader opts a WebSocket into the append shape.
var appendHeader = http.Header{"OpenAI-Beta": {server.AppendBeta}}

// shellTool is a function tool the sim calls with {"cmd": "echo tether-call-N"}.
var shellTool = map[string]any{"type": "function", "name": "exec_command", "description": "run a command",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}},
		"required": []string{"cmd"}}}

// create is a response.create with the shell tool and sim.calls sequential tool-call steps.
func create(text string, calls int, extra map[string]string) map[string]any {
	md := map[string]string{"sim.calls": strconv.Itoa(calls)}
	for k, v := range extra {
		md[k] = v
	}
	return map[string]any{"type": "response.create", "model": "sim", "input": text,
		"tools": []any{shellTool}, "metadata": md}
}

// outputs answers every pending call of a response.done with "out-<call number>".
func outputs(done wstest.Frame, n *int) []any {
	var in []any
	for _, id := range done.Get("pending_call_ids").([]any) {
		*n++
		in = append(in, map[string]any{"type": "function_call_output", "call_id": id, "output": fmt.Sprintf("out-%d", *n)})
	}
	return in
}

// metric returns the value of the sample named exactly name (with labels) in base's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	return servertest.Metric(t, base, name)
}

const (
	hotMetric = `tether_continuations_total{path="hot"}`
	newMetric = `tether_continuations_total{path="new"}`
)

// TestAppendRolloutThroughChain: an append-shape rollout of three tool calls through the
// front runs as one upstream chain: every later step is an upstream hot continuation that
// carries only the tool output, and the usage is the upstream's (cached_tokens > 0 on hot
// steps).
func TestAppendRolloutThroughChain(t *testing.T) {
	up := upstream(t, server.Options{})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("list the files", 3, nil))
	n, prevCached := 0, 0
	for step := 0; ; step++ {
		fs := c.Until("response.done", "response.completed", "response.failed", "response.incomplete")
		last := fs[len(fs)-1]
		cached, _ := last.Int("usage", "input_tokens_details", "cached_tokens")
		if last.Type() == "response.completed" || last.Type() != "response.done" {
			cached, _ = last.Int("response", "usage", "input_tokens_details", "cached_tokens")
		}
		if step > 0 && cached <= prevCached {
			t.Fatalf("step %d: cumulative cached_tokens %d, want more than %d (hot upstream step)", step, cached, prevCached)
		}
		prevCached = cached
		if last.Type() != "response.done" {
			if last.Type() != "response.completed" || step != 3 {
				t.Fatalf("step %d ended %s: %v", step, last.Type(), last)
			}
			text := answer(last)
			for i := 1; i <= 3; i++ {
				if !strings.Contains(text, fmt.Sprintf(`tool: "out-%d"`, i)) {
					t.Fatalf("the answer does not quote out-%d: %q", i, text)
				}
			}
			break
		}
		c.Send(map[string]any{"type": "response.append", "response_id": last.Str("response_id"), "input": outputs(last, &n)})
	}
	if hot, fresh := metric(t, up, hotMetric), metric(t, up, newMetric); hot != 3 || fresh != 1 {
		t.Fatalf("upstream continuations: hot %v new %v, want 3 and 1", hot, fresh)
	}
}

// answer returns the text of the last message of a terminal event's Response.
func answer(f wstest.Frame) string {
	out, _ := f.Get("response", "output").([]any)
	for i := len(out) - 1; i >= 0; i-- {
		it, _ := out[i].(map[string]any)
		if it["type"] != "message" {
			continue
		}
		parts, _ := it["content"].([]any)
		var b strings.Builder
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			s, _ := pm["text"].(string)
			b.WriteString(s)
		}
		return b.String()
	}
	return ""
}

// TestPublicShapeThroughChain: the public shape over WebSocket: a tool call, then its output
// as a continuation (the front's hot path, the upstream's too), then a new user turn.
func TestPublicShapeThroughChain(t *testing.T) {
	up := upstream(t, server.Options{})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), nil)
	c.Send(create("hello", 1, nil))
	fs := c.Until("response.completed")
	r1 := fs[len(fs)-1]
	out := r1.Get("response", "output").([]any)
	call := out[0].(map[string]any)
	if call["type"] != "function_call" {
		t.Fatalf("first response: %v", r1)
	}
	next := create("", 1, nil)
	next["previous_response_id"] = r1.Str("response", "id")
	next["input"] = []any{map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "out-1"}}
	c.Send(next)
	fs = c.Until("response.completed")
	r2 := fs[len(fs)-1]
	if txt := answer(r2); !strings.Contains(txt, `tool: "out-1"`) {
		t.Fatalf("second response does not quote the output: %q", txt)
	}
	if n, _ := r2.Int("response", "usage", "input_tokens_details", "cached_tokens"); n == 0 {
		t.Fatalf("hot turn reports no cached tokens: %v", r2.Get("response", "usage"))
	}
	if hot := metric(t, up, hotMetric); hot != 1 {
		t.Fatalf("upstream hot continuations %v, want 1", hot)
	}
}

// TestHTTPThroughChain: POST /v1/responses on the front, with SSE.
func TestHTTPThroughChain(t *testing.T) {
	up := upstream(t, server.Options{})
	fr := front(t, wsURL(up), 10*time.Second)
	body := `{"model":"sim","input":"hi there","stream":true}`
	resp, err := http.Post(fr+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "event: response.completed") || !strings.Contains(string(b), `user: \"hi there\"`) {
		t.Fatalf("HTTP %d:\n%s", resp.StatusCode, b)
	}
}

// TestConnectionAgeLimit: the upstream's connection-age limit passes while the rollout is
// suspended; the next step starts a new upstream chain on a new socket with the full context,
// and the client sees nothing of it.
func TestConnectionAgeLimit(t *testing.T) {
	up := upstream(t, server.Options{Limits: session.Limits{MaxConnectionAge: 300 * time.Millisecond}})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("age", 2, nil))
	n := 0
	for step := 0; step < 2; step++ {
		fs := c.Until("response.done")
		time.Sleep(600 * time.Millisecond) // the upstream socket passes its age limit
		c.Send(map[string]any{"type": "response.append", "response_id": fs[len(fs)-1].Str("response_id"), "input": outputs(fs[len(fs)-1], &n)})
	}
	fs := c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" || !strings.Contains(answer(last), `tool: "out-2"`) {
		t.Fatalf("rollout across the reconnects: %v", last)
	}
	if fresh := metric(t, up, newMetric); fresh != 3 {
		t.Fatalf("upstream new chains %v, want 3 (one per socket)", fresh)
	}
}

// proxy is a TCP proxy in front of the upstream that can cut every connection.
type proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
	inFrame atomic.Bool // cutInFrame: end the upstream → client streams inside their next frame
	slow    atomic.Pointer[trickle]
}

// trickle is how the proxy relays the next upstream → client frame of more than over payload
// bytes: in pieces of piece bytes, pause apart. took receives how long the frame took.
type trickle struct {
	over, piece int64
	pause       time.Duration
	took        chan time.Duration
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	addr := strings.TrimPrefix(target, "http://")
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer p.wg.Done(); p.relay(in, out); in.Close(); out.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

// cutInFrame makes every upstream → client stream end inside its next WebSocket frame, right
// after the frame's header.
func (p *proxy) cutInFrame() { p.inFrame.Store(true) }

// trickleNext makes the proxy relay the next upstream → client frame of more than over
// payload bytes slowly (trickle); the returned channel receives how long its relay took.
func (p *proxy) trickleNext(over, piece int64, pause time.Duration) <-chan time.Duration {
	tr := &trickle{over: over, piece: piece, pause: pause, took: make(chan time.Duration, 1)}
	p.slow.Store(tr)
	return tr.took
}

// copyPayload relays one frame's n payload bytes from r to client: at once, or trickled when
// a trickle waits for a frame of this size.
func (p *proxy) copyPayload(client net.Conn, r io.Reader, n int64) error {
	tr := p.slow.Load()
	if tr == nil || n <= tr.over || !p.slow.CompareAndSwap(tr, nil) {
		_, err := io.CopyN(client, r, n)
		return err
	}
	start := time.Now()
	for left := n; left > 0; left -= tr.piece {
		if _, err := io.CopyN(client, r, min(left, tr.piece)); err != nil {
			return err
		}
		if left > tr.piece {
			time.Sleep(tr.pause)
		}
	}
	tr.took <- time.Since(start)
	return nil
}

// relay copies the upstream's answer to the client: the HTTP upgrade answer, then whole
// WebSocket frames (server frames are not masked), until cutInFrame.
func (p *proxy) relay(client, up net.Conn) {
	r := bufio.NewReader(up)
	for { // the 101 answer's header lines
		line, err := r.ReadSlice('\n')
		if _, werr := client.Write(line); err != nil || werr != nil {
			return
		}
		if len(line) <= 2 {
			break
		}
	}
	for {
		var head [14]byte
		if _, err := io.ReadFull(r, head[:2]); err != nil {
			return
		}
		h, n := 2, int64(head[1]&0x7f)
		switch n {
		case 126:
			h += 2
		case 127:
			h += 8
		}
		if _, err := io.ReadFull(r, head[2:h]); err != nil {
			return
		}
		switch {
		case n == 126:
			n = int64(binary.BigEndian.Uint16(head[2:4]))
		case n == 127:
			n = int64(binary.BigEndian.Uint64(head[2:10]))
		}
		if _, err := client.Write(head[:h]); err != nil {
			return
		}
		if p.inFrame.Load() && n > 0 {
			return // the header went out, its payload never does
		}
		if err := p.copyPayload(client, r, n); err != nil {
			return
		}
	}
}

// cut closes every proxied connection (the upstream "dies" for its clients).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestUpstreamDropsMidStep: the upstream socket drops while an answer streams: the rollout
// ends failed (server_error, naming the upstream) and the client connection stays usable.
func TestUpstreamDropsMidStep(t *testing.T) {
	up := upstream(t, server.Options{})
	px := newProxy(t, up)
	fr := front(t, px.url()+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	slow := create("slow", 0, map[string]string{"sim.speed": "1000", "sim.answer_tokens": "20000"})
	c.Send(slow)
	c.Until("response.output_text.delta")
	px.cut()
	fs := c.Until("response.failed", "response.completed")
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "server_error" ||
		!strings.Contains(last.Str("response", "error", "message"), "upstream") {
		t.Fatalf("want response.failed naming the upstream, got %v", last.Get("response", "error"))
	}
	c.Send(create("again", 0, nil))
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("the connection's next rollout: %v", last.Get("response", "error"))
	}
}

// TestUpstreamEndsInsideAFrame: an upstream connection that ends inside a WebSocket frame is
// a lost connection, not a message: the step fails naming it, and no cut-off text reaches
// the client as output.
func TestUpstreamEndsInsideAFrame(t *testing.T) {
	up := upstream(t, server.Options{})
	px := newProxy(t, up)
	fr := front(t, px.url()+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("slow", 0, map[string]string{"sim.speed": "1000", "sim.answer_tokens": "20000"}))
	c.Until("response.output_text.delta")
	px.cutInFrame()
	fs := c.Until("response.failed", "response.completed")
	last := fs[len(fs)-1]
	msg := last.Str("response", "error", "message")
	if last.Type() != "response.failed" || !strings.Contains(msg, "inside a WebSocket message") {
		t.Fatalf("want response.failed naming a connection that ended inside a message, got %s %v", last.Type(), last.Get("response", "error"))
	}
}

// TestUpstreamSilence: an upstream that stops sending fails the step after the timeout.
func TestUpstreamSilence(t *testing.T) {
	up := upstream(t, server.Options{})
	fr := front(t, up+"/v1", 300*time.Millisecond)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	// At 65 tokens/s with a 500ms TTFT the upstream is silent longer than the timeout.
	c.Send(create("slow", 0, map[string]string{"sim.speed": "65"}))
	fs := c.Until("response.failed", "response.completed")
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || !strings.Contains(last.Str("response", "error", "message"), "silent") {
		t.Fatalf("want a failed step for the upstream's silence, got %v", last)
	}
}

// TestSlowFrameIsNotSilence: a large upstream frame whose bytes keep arriving, but which takes
// longer than the silence timeout to arrive whole, is waited for: the timeout counts from the
// last bytes received, and the rollout completes.
func TestSlowFrameIsNotSilence(t *testing.T) {
	// The timeout also covers the upstream's first frame, which may take a while on a loaded
	// machine: the trickled frame takes more than 2.75 timeouts whatever it is.
	const timeout = 2 * time.Second
	up := upstream(t, server.Options{})
	px := newProxy(t, up)
	fr := front(t, px.url()+"/v1", timeout)
	// The upstream's response.created echoes the 96 KiB instructions: it is the first frame
	// over 64 KiB, and comes in 8 KiB pieces a quarter of the timeout apart (11 pauses, so
	// 2.75 timeouts or more in all).
	took := px.trickleNext(64<<10, 8<<10, timeout/4)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	req := create("slow frame", 0, nil)
	req["instructions"] = strings.Repeat("word ", 96<<10/5)
	c.Send(req)
	fs := c.Until("response.failed", "response.completed")
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" || !strings.Contains(answer(last), "slow frame") {
		t.Fatalf("want the slow frame waited for and the answer, got %s %v", last.Type(), last.Get("response", "error"))
	}
	select {
	case d := <-took:
		if d <= timeout {
			t.Fatalf("the trickled frame took %v, not more than the timeout %v", d, timeout)
		}
	default:
		t.Fatal("no frame was trickled")
	}
}

// TestCancelClosesUpstream: cancelling a sampling rollout closes its upstream socket, so the
// upstream stops generating; the connection's next rollout dials again.
func TestCancelClosesUpstream(t *testing.T) {
	up := upstream(t, server.Options{})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("slow", 0, map[string]string{"sim.speed": "1000", "sim.answer_tokens": "20000"}))
	fs := c.Until("response.output_text.delta")
	c.Send(map[string]any{"type": "response.cancel", "response_id": fs[0].Str("response", "id")})
	fs = c.Until("response.incomplete", "response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.incomplete" {
		t.Fatalf("cancel: %v", last)
	}
	waitMetric(t, up, `tether_connections{shape="public"}`, 0)
	c.Send(create("again", 0, nil))
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("next rollout: %v", last)
	}
}

// waitMetric waits (up to 10s) for a gauge to reach want.
func waitMetric(t *testing.T, base, name string, want float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for metric(t, base, name) != want {
		select {
		case <-ctx.Done():
			t.Fatalf("%s stays %v, want %v", name, metric(t, base, name), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestUpstreamAPIKey: the key goes upstream on the upgrade; a wrong one fails the step with
// the upstream's HTTP status, and the client's own key is never what the upstream sees.
func TestUpstreamAPIKey(t *testing.T) {
	_, up := servertest.Start(t, server.Options{Keys: server.NewKeys("sk-upstream")})
	for key, ok := range map[string]bool{"sk-upstream": true, "sk-wrong": false} {
		m, err := responses.New(responses.Options{URL: up + "/v1", APIKey: key, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, fr := startFront(t, server.Options{Model: m})
		c := wstest.Dial(t, wsURL(fr), nil)
		c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "hi"})
		fs := c.Until("response.completed", "response.failed")
		last := fs[len(fs)-1]
		if got := last.Type() == "response.completed"; got != ok {
			t.Fatalf("key %s: %v", key, last)
		}
		if !ok && !strings.Contains(last.Str("response", "error", "message"), "HTTP 401") {
			t.Fatalf("key %s: the error does not name the upstream's 401: %v", key, last.Get("response", "error"))
		}
	}
}

// TestSuspendedKeepsUpstreamAlive: while a rollout is suspended longer than the upstream's
// ping interval, the backend still answers the upstream's pings, so the next step continues
// the upstream chain on its hot path instead of starting a new one on a new socket.
func TestSuspendedKeepsUpstreamAlive(t *testing.T) {
	up := upstream(t, server.Options{Limits: session.Limits{PingInterval: 200 * time.Millisecond}})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("ping", 1, nil))
	fs := c.Until("response.done")
	time.Sleep(time.Second) // five upstream ping intervals while suspended
	n := 0
	c.Send(map[string]any{"type": "response.append", "response_id": fs[len(fs)-1].Str("response_id"), "input": outputs(fs[len(fs)-1], &n)})
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("rollout: %v", last)
	}
	if hot, fresh := metric(t, up, hotMetric), metric(t, up, newMetric); hot != 1 || fresh != 1 {
		t.Fatalf("upstream continuations: hot %v new %v, want 1 and 1 (one socket, one chain)", hot, fresh)
	}
}

// TestPreviousResponseNotFound: the upstream remembers one response per connection, so
// two interleaved rollouts of one client connection evict each other's upstream chain; each
// continuation gets previous_response_not_found upstream and is sent again with the full
// context, unseen by the client.
func TestPreviousResponseNotFound(t *testing.T) {
	up := upstream(t, server.Options{Limits: session.Limits{CacheResponses: 1}})
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	var dones []wstest.Frame
	for _, text := range []string{"first rollout", "second rollout"} {
		c.Send(create(text, 1, nil))
		fs := c.Until("response.done")
		dones = append(dones, fs[len(fs)-1])
	}
	n := 0
	for i, d := range dones {
		c.Send(map[string]any{"type": "response.append", "response_id": d.Str("response_id"), "input": outputs(d, &n)})
		fs := c.Until("response.completed", "response.failed")
		last := fs[len(fs)-1]
		if last.Type() != "response.completed" || !strings.Contains(answer(last), fmt.Sprintf(`tool: "out-%d"`, i+1)) {
			t.Fatalf("rollout %d: %v", i, last)
		}
	}
	if hot, fresh := metric(t, up, hotMetric), metric(t, up, newMetric); hot != 0 || fresh != 4 {
		t.Fatalf("upstream continuations: hot %v new %v, want 0 and 4", hot, fresh)
	}
}

// TestUpstreamErrorFrame: an upstream error frame fails the step with response.failed
// (server_error) naming the upstream's status, code and message; the connection goes on.
func TestUpstreamErrorFrame(t *testing.T) {
	up := upstream(t, server.Options{Limits: session.Limits{MaxSuspended: 1}}) // one live rollout per upstream socket
	fr := front(t, up+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("first", 1, nil))
	first := c.Until("response.done")
	c.Send(create("second", 1, nil))
	fs := c.Until("response.failed", "response.done")
	last := fs[len(fs)-1]
	msg := last.Str("response", "error", "message")
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "server_error" ||
		!strings.Contains(msg, "upstream error 429 rollout_limit_reached") {
		t.Fatalf("want response.failed naming the upstream's 429 rollout_limit_reached, got %v", last)
	}
	n := 0
	d := first[len(first)-1]
	c.Send(map[string]any{"type": "response.append", "response_id": d.Str("response_id"), "input": outputs(d, &n)})
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("the first rollout after the error: %v", last)
	}
}

// TestModelsFromUpstream: GET /v1/models on the front lists the upstream's models (asked with
// the upstream key), not the sim's.
func TestModelsFromUpstream(t *testing.T) {
	_, up := servertest.Start(t, server.Options{Keys: server.NewKeys("sk-upstream"),
		Models: []server.ModelInfo{{ID: "upstream-model", Object: "model", OwnedBy: "test"}}})
	m, err := responses.New(responses.Options{URL: up + "/v1", APIKey: "sk-upstream", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, fr := startFront(t, server.Options{Model: m})
	for path, want := range map[string]int{"/v1/models/upstream-model": 200, "/v1/models/sim": 404} {
		resp, err := http.Get(fr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s on the front: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
