package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/conformance"
)

// The broken test doubles: Tether behind a WebSocket proxy that breaks one rule of the
// protocol. Each test runs the scenarios that must catch the bug and checks they fail, so the
// suite is shown to catch what it claims to check.

// frame is one decoded JSON frame the proxy may rewrite.
type frame = map[string]any

// double is a broken server: the real Tether behind a proxy. HTTP requests go to Tether
// unchanged; WebSocket frames pass through the hooks.
type double struct {
	real     http.Handler
	upstream string // ws://…/v1/responses of the real server
	// toClient rewrites a server frame; it returns the frames to send instead (nil drops it).
	toClient func(c *proxied, f frame) []frame
	// toServer may answer a client frame itself: it returns the frames to send back, and
	// whether to forward the client frame to the server.
	toServer func(c *proxied, f frame) (answer []frame, forward bool)
	// hideOptIn drops the append opt-in confirmation from the 101.
	hideOptIn bool
	// swallowClose keeps the client's socket open when the server closes.
	swallowClose bool
	// on413, if set, rewrites the body of the server's HTTP 413 answers.
	on413 func(body []byte) []byte
	// bufferBodies reads each HTTP request's whole body before passing the request on, as a
	// buffering gateway does; bodyBytes counts what it read.
	bufferBodies bool
	bodyBytes    atomic.Int64
}

// proxied is one proxied connection's state, for hooks that need memory.
type proxied struct {
	append bool
	mu     sync.Mutex // guards the fields below
	calls  map[string]bool
	seq    map[string]int // next sequence_number per response
	cur    string         // the response the next output event belongs to
	quiet  bool
}

func newDouble(t *testing.T, d *double) string {
	t.Helper()
	url, s := tether(t)
	d.real = s
	d.upstream = "ws" + strings.TrimPrefix(url, "http") + "/responses"
	hs := httptest.NewServer(d)
	t.Cleanup(hs.Close)
	return hs.URL + "/v1"
}

func (d *double) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		d.serveHTTP(w, r)
		return
	}
	h := http.Header{}
	for _, k := range []string{"OpenAI-Beta", "Authorization"} {
		for _, v := range r.Header.Values(k) {
			h.Add(k, v)
		}
	}
	url := d.upstream
	if r.URL.RawQuery != "" {
		url += "?" + r.URL.RawQuery
	}
	up, resp, err := websocket.Dial(r.Context(), url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	confirmed := resp.Header.Get("OpenAI-Beta") != ""
	if confirmed && !d.hideOptIn {
		w.Header().Set("OpenAI-Beta", resp.Header.Get("OpenAI-Beta"))
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer c.CloseNow()
	up.SetReadLimit(-1)
	c.SetReadLimit(-1)
	pc := &proxied{append: confirmed, calls: map[string]bool{}, seq: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // server → client
		defer wg.Done()
		defer cancel()
		for {
			typ, data, err := up.Read(ctx)
			if err != nil {
				if code := websocket.CloseStatus(err); code != -1 && !d.swallowClose {
					_ = c.Close(code, "")
				}
				if d.swallowClose {
					<-ctx.Done()
				}
				return
			}
			out := [][]byte{data}
			if d.toClient != nil && typ == websocket.MessageText {
				out = rewrite(data, func(f frame) []frame { return d.toClient(pc, f) })
			}
			for _, b := range out {
				if c.Write(ctx, typ, b) != nil {
					return
				}
			}
		}
	}()
	for { // client → server
		typ, data, err := c.Read(ctx)
		if err != nil {
			break
		}
		if d.toServer != nil && typ == websocket.MessageText {
			var f frame
			if json.Unmarshal(data, &f) == nil {
				answer, forward := d.toServer(pc, f)
				for _, a := range answer {
					b, _ := json.Marshal(a)
					_ = c.Write(ctx, websocket.MessageText, b)
				}
				if !forward {
					continue
				}
			}
		}
		if up.Write(ctx, typ, data) != nil {
			break
		}
	}
	cancel()
	_ = up.CloseNow()
	wg.Wait()
}

// serveHTTP passes an HTTP request to the server, through the double's HTTP hooks.
func (d *double) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if d.bufferBodies {
		body, err := io.ReadAll(r.Body)
		d.bodyBytes.Add(int64(len(body)))
		if err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if d.on413 == nil {
		d.real.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	d.real.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusRequestEntityTooLarge {
		body = d.on413(body)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// rewrite applies fn to a JSON frame (frames that are not JSON objects pass unchanged).
func rewrite(data []byte, fn func(frame) []frame) [][]byte {
	var f frame
	if json.Unmarshal(data, &f) != nil || f == nil {
		return [][]byte{data}
	}
	var out [][]byte
	for _, g := range fn(f) {
		b, _ := json.Marshal(g)
		out = append(out, b)
	}
	return out
}

func typeOf(f frame) string { s, _ := f["type"].(string); return s }

// renumber gives the events contiguous sequence numbers again after the double dropped or
// added some, so only the intended bug shows: per response in the public shape, per rollout in
// the append shape (output events belong to the rollout last named by an event).
func (c *proxied) renumber(f frame) frame {
	if _, ok := f["sequence_number"]; !ok {
		return f
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok := f["response"].(map[string]any); ok {
		c.cur, _ = resp["id"].(string)
	} else if id, ok := f["response_id"].(string); ok {
		c.cur = id
	}
	if typeOf(f) == "response.created" {
		c.seq[c.cur] = 0
	}
	f["sequence_number"] = c.seq[c.cur]
	c.seq[c.cur]++
	return f
}

// expectCaught runs the scenarios matching pattern against the double and checks that every
// scenario in mustFail failed; it logs the suite's output.
func expectCaught(t *testing.T, url, pattern string, timeout time.Duration, mustFail ...string) conformance.Report {
	t.Helper()
	rep, out := run(t, conformance.Config{URL: url, Run: regexp.MustCompile(pattern), MaxFrame: maxFrame, Timeout: timeout})
	t.Logf("the suite against the double:\n%s", out)
	status := map[string]string{}
	for _, r := range rep.Results {
		status[r.Name] = r.Status
	}
	for _, name := range mustFail {
		if status[name] != "fail" {
			t.Errorf("%s: %q, want fail", name, status[name])
		}
	}
	return rep
}

// failureOf is the failure message of the named scenario.
func failureOf(rep conformance.Report, name string) string {
	for _, r := range rep.Results {
		if r.Name == name {
			return r.Reason
		}
	}
	return ""
}

func TestDoubleSkipsOutputItemDone(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if typeOf(f) == "response.output_item.done" {
			return nil
		}
		return []frame{c.renumber(f)}
	}})
	rep := expectCaught(t, url, `^(public|append)/(text-turn|tools-1)$`, 5*time.Second,
		"public/text-turn", "public/tools-1", "append/text-turn", "append/tools-1")
	if m := failureOf(rep, "public/tools-1"); !strings.Contains(m, "output_item.done") {
		t.Errorf("the failure does not name the missing output_item.done: %q", m)
	}
}

func TestDoubleKeepsParentAfterFailedContinuation(t *testing.T) {
	// The double answers a continuation that names an unknown call itself, so the server never
	// sees the failed continuation and never evicts its parent.
	url := newDouble(t, &double{
		toClient: func(c *proxied, f frame) []frame {
			if typeOf(f) == "response.output_item.done" {
				if item, _ := f["item"].(map[string]any); item["type"] == "function_call" {
					c.mu.Lock()
					c.calls[item["call_id"].(string)] = true
					c.mu.Unlock()
				}
			}
			return []frame{f}
		},
		toServer: func(c *proxied, f frame) ([]frame, bool) {
			if typeOf(f) != "response.create" || f["previous_response_id"] == nil {
				return nil, true
			}
			in, _ := f["input"].([]any)
			for _, it := range in {
				m, _ := it.(map[string]any)
				c.mu.Lock()
				known := c.calls[m["call_id"].(string)]
				c.mu.Unlock()
				if m["type"] == "function_call_output" && !known {
					return []frame{{"type": "error", "status": 400, "error": frame{"type": "invalid_request_error",
						"code": "tool_call_not_found", "message": "No tool call found.", "param": "input"}}}, false
				}
			}
			return nil, true
		},
	})
	rep := expectCaught(t, url, `^public/error/(evicted-parent|tool-call-not-found)$`, 5*time.Second,
		"public/error/evicted-parent", "public/error/tool-call-not-found")
	if m := failureOf(rep, "public/error/evicted-parent"); !strings.Contains(m, "unexpected frame") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleSendsResponseDoneOnPublicShape(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if c.append {
			return []frame{f}
		}
		switch typeOf(f) {
		case "response.completed", "response.incomplete", "response.failed":
			resp, _ := f["response"].(map[string]any)
			done := frame{"type": "response.done", "response_id": resp["id"], "pending_call_ids": []any{}, "output": resp["output"], "usage": resp["usage"], "sequence_number": 0}
			return []frame{c.renumber(done), c.renumber(f)}
		}
		return []frame{c.renumber(f)}
	}})
	rep := expectCaught(t, url, `^public/text-turn$`, 5*time.Second, "public/text-turn")
	if m := failureOf(rep, "public/text-turn"); !strings.Contains(m, "response.done is not an event of the public shape") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleCorruptsDeltas(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if typeOf(f) == "response.function_call_arguments.delta" {
			f["delta"] = strings.ToUpper(f["delta"].(string))
		}
		return []frame{f}
	}})
	rep := expectCaught(t, url, `^append/tools-1$`, 5*time.Second, "append/tools-1")
	if m := failureOf(rep, "append/tools-1"); !strings.Contains(m, "differ from the deltas") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleTerminalOutputLosesAnItem(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if typeOf(f) == "response.completed" {
			resp := f["response"].(map[string]any)
			if out, _ := resp["output"].([]any); len(out) > 1 {
				resp["output"] = out[1:]
			}
		}
		return []frame{f}
	}})
	rep := expectCaught(t, url, `^append/tools-5$`, 5*time.Second, "append/tools-5")
	if m := failureOf(rep, "append/tools-5"); !strings.Contains(m, "terminal Response's output") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleErrorFrameWithSequenceNumber(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if typeOf(f) == "error" {
			f["sequence_number"] = 0
		}
		return []frame{f}
	}})
	rep := expectCaught(t, url, `^public/error/unknown-parent$`, 5*time.Second, "public/error/unknown-parent")
	if m := failureOf(rep, "public/error/unknown-parent"); !strings.Contains(m, "sequence_number") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleChangesTheAnswerOnOneShape(t *testing.T) {
	// The public shape's answers are rewritten consistently (deltas, done texts, items, the
	// terminal Response): the grammar holds, only shape equivalence can see it.
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		if !c.append {
			replaceStrings(f, "tokens", "t0kens")
		}
		return []frame{f}
	}})
	rep := expectCaught(t, url, `^(public/text-turn|equivalence/text-turn)$`, 5*time.Second, "equivalence/text-turn")
	if rep.Passed != 1 {
		t.Errorf("public/text-turn should still pass (the grammar holds): %+v", rep.Results)
	}
}

func replaceStrings(v any, old, repl string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok {
				x[k] = strings.ReplaceAll(s, old, repl)
			} else {
				replaceStrings(e, old, repl)
			}
		}
	case []any:
		for i, e := range x {
			if s, ok := e.(string); ok {
				x[i] = strings.ReplaceAll(s, old, repl)
			} else {
				replaceStrings(e, old, repl)
			}
		}
	}
}

func TestDoubleFallsSilent(t *testing.T) {
	url := newDouble(t, &double{toClient: func(c *proxied, f frame) []frame {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.quiet {
			return nil
		}
		c.quiet = typeOf(f) == "response.in_progress"
		return []frame{f}
	}})
	start := time.Now()
	rep := expectCaught(t, url, `^public/text-turn$`, 300*time.Millisecond, "public/text-turn")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the suite took %v against a silent server", d)
	}
	if m := failureOf(rep, "public/text-turn"); !strings.Contains(m, "no frame within 300ms") {
		t.Errorf("unexpected failure: %q", m)
	}
	if f := rep.Results[0].Failure; f == nil || len(f.Frames) < 2 || !strings.Contains(strings.Join(f.Frames, "\n"), "response.in_progress") {
		t.Errorf("the failure does not show the last frames received: %+v", f)
	}
}

func TestDoubleKeepsSocketOpenAfterOversize(t *testing.T) {
	url := newDouble(t, &double{swallowClose: true})
	rep := expectCaught(t, url, `^append/error/oversize-frame$`, 300*time.Millisecond, "append/error/oversize-frame")
	if m := failureOf(rep, "append/error/oversize-frame"); !strings.Contains(m, "still open") {
		t.Errorf("unexpected failure: %q", m)
	}
}

func TestDoubleHidesAppendOptIn(t *testing.T) {
	url := newDouble(t, &double{hideOptIn: true})
	rep, out := run(t, conformance.Config{URL: url, Run: regexp.MustCompile(`^(public|append)/text-turn$`)})
	t.Logf("the suite against the double:\n%s", out)
	if rep.Passed != 1 || rep.Skipped != 1 || !strings.Contains(rep.Results[1].Reason, "does not confirm the append opt-in") {
		t.Fatalf("append scenarios must be skipped when the 101 does not confirm the opt-in: %+v", rep.Results)
	}
}

// oversize matches the scenarios that need the server's frame limit, and one that does not.
var oversize = regexp.MustCompile(`^(public|append)/error/(oversize-frame|oversize-body|binary-frame)$`)

// needLimit are the scenarios oversize selects that need the frame limit.
var needLimit = []string{"public/error/oversize-frame", "append/error/oversize-frame", "public/error/oversize-body"}

// TestDoubleNamesNoFrameLimit: a server whose 413 answer names no limit (a gateway's own error
// page) leaves the frame limit unknown: the scenarios that need it are skipped saying why,
// the closing line counts them, and the others run.
func TestDoubleNamesNoFrameLimit(t *testing.T) {
	url := newDouble(t, &double{on413: func([]byte) []byte {
		return []byte(`{"error":{"message":"Too large.","type":"invalid_request_error"}}`)
	}})
	rep, out := run(t, conformance.Config{URL: url, Run: oversize})
	t.Logf("the suite against the double:\n%s", out)
	for _, r := range rep.Results {
		want := "pass"
		if slices.Contains(needLimit, r.Name) {
			want = "skip"
			if !strings.Contains(r.Reason, "frame limit is unknown") || !strings.Contains(r.Reason, "does not name the limit") {
				t.Errorf("%s: the skip does not say why: %q", r.Name, r.Reason)
			}
		}
		if r.Status != want {
			t.Errorf("%s: %s (%s), want %s", r.Name, r.Status, r.Reason, want)
		}
	}
	if len(rep.Results) != 5 || rep.MaxFrame != 0 || rep.MaxFrameUnknown == "" {
		t.Errorf("%d results, max_frame %d, max_frame_unknown %q", len(rep.Results), rep.MaxFrame, rep.MaxFrameUnknown)
	}
	if !strings.HasSuffix(out, "2 passed, 0 failed, 3 skipped (3 of them need the frame limit, which is unknown: pass -max-frame)\n") {
		t.Errorf("the closing line does not explain the skips")
	}
}

// TestDoubleClaimsWrongFrameLimit: a server that names a limit it does not enforce (half of
// its real one) fails the oversize scenarios: the limit it names is checked, not trusted.
func TestDoubleClaimsWrongFrameLimit(t *testing.T) {
	url := newDouble(t, &double{on413: func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(strconv.Itoa(maxFrame)), []byte(strconv.Itoa(maxFrame/2)))
	}})
	rep, out := run(t, conformance.Config{URL: url, Run: oversize})
	t.Logf("the suite against the double:\n%s", out)
	for _, name := range needLimit {
		if st := statusOf(rep, name); st != "fail" {
			t.Errorf("%s: %q, want fail", name, st)
		}
	}
	if rep.MaxFrame != maxFrame/2 || rep.MaxFrameSource != conformance.FrameLimitServer {
		t.Errorf("max_frame %d from %q, want the %d the server named", rep.MaxFrame, rep.MaxFrameSource, maxFrame/2)
	}
}

// TestDoubleBuffersBodies: behind a gateway that reads the whole body before the server sees
// the request, the probe gets no refusal: it sends none of its declared body, the limit is
// unknown and the scenarios that need it are skipped.
func TestDoubleBuffersBodies(t *testing.T) {
	d := &double{bufferBodies: true}
	url := newDouble(t, d)
	rep, out := run(t, conformance.Config{URL: url, Run: regexp.MustCompile(`^public/error/oversize-body$`)})
	t.Logf("the suite against the double:\n%s", out)
	if len(rep.Results) != 1 || rep.Results[0].Status != "skip" || !strings.Contains(rep.Results[0].Reason, "got no refusal") {
		t.Fatalf("want the scenario skipped for a probe without refusal: %+v", rep.Results)
	}
	if n := d.bodyBytes.Load(); n != 0 {
		t.Errorf("the probe sent %d bytes of its body", n)
	}
}

// statusOf is the status of the named scenario ("" when it did not run).
func statusOf(rep conformance.Report, name string) string {
	for _, r := range rep.Results {
		if r.Name == name {
			return r.Status
		}
	}
	return ""
}
