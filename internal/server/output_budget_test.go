package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/simmeta"
	"github.com/tetherd/tether/internal/wsguard"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC() // what was allocated during the first one
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// dialSmallWindow opens an append-shape WebSocket to the server at addr whose socket receive
// buffer is 4 KiB: once the client stops reading, the server's writes stop after a few KiB.
func dialSmallWindow(t *testing.T, addr string) *wstest.Client {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	h := http.Header{}
	h.Add("OpenAI-Beta", AppendBeta)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+addr+"/v1/responses",
		&websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(&http.Client{Transport: tr})})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return &wstest.Client{T: t, C: c, Resp: resp}
}

// longAnswer is a create of the sim's longest answer: simmeta.MaxAnswerTokens filler words,
// about 5 MiB of text.
func longAnswer() map[string]any {
	return create("tell me everything", map[string]string{simmeta.AnswerTokens: strconv.Itoa(simmeta.MaxAnswerTokens)})
}

// TestUnreadAnswersCountedInBudget: twenty clients each ask the sim for its longest answer
// (about 5 MiB of text) and stop reading once its first delta has come. While they do not
// read, what the server holds for them, their answers included, is counted in the memory
// budget: the live heap grows by no more than the budget counts, plus a little per
// connection that the budget's flat charge per connection leaves out (its write buffers);
// and everything is given back once they go.
func TestUnreadAnswersCountedInBudget(t *testing.T) {
	const clients = 20
	const slack = 8 << 20 // 400 KiB per connection
	s, addr := realServerOn(t, Options{MaxMemory: 64 << 20}, func(l net.Listener) net.Listener { return smallSendBuffers{l} })
	b := s.Budget()
	warm := dialSmallWindow(t, addr) // the tokenizer's tables and the server's pools, before the baseline
	warm.Send(create("warm up", map[string]string{simmeta.AnswerTokens: "64"}))
	warm.Until("response.completed")
	warm.C.CloseNow()
	waitFor(t, func() bool { return b.InUse() == 0 })
	heap0 := liveHeap()

	cs := make([]*wstest.Client, clients)
	for i := range cs {
		cs[i] = dialSmallWindow(t, addr)
		cs[i].Send(longAnswer())
	}
	for i, c := range cs {
		if fs := c.Until("response.output_text.delta", "response.failed"); fs[len(fs)-1].Type() != "response.output_text.delta" {
			t.Fatalf("client %d: %v", i, fs[len(fs)-1]) // 64 MiB hold the first deltas of all
		}
		// The client reads no more.
	}
	heap := liveHeap() - heap0
	counted := b.InUse()
	t.Logf("%d clients not reading their answers: live heap +%.1f MiB, budget in use %.1f MiB",
		clients, float64(heap)/(1<<20), float64(counted)/(1<<20))
	if heap > counted+slack {
		t.Fatalf("the live heap grew by %d bytes while the budget counts %d: %d bytes held for the unread answers are not counted",
			heap, counted, heap-counted)
	}
	for _, c := range cs {
		c.C.CloseNow()
	}
	waitFor(t, func() bool { return b.InUse() == 0 })
}

// postBody is the body of a POST /v1/responses for create (a response.create frame).
func postBody(create map[string]any, stream bool) string {
	body := map[string]any{}
	for k, v := range create {
		if k != "type" {
			body[k] = v
		}
	}
	body["store"], body["stream"] = false, stream
	b, _ := json.Marshal(body)
	return string(b)
}

// TestAnswerOverBudgetFails: an answer streamed over SSE that does not fit in the server's
// memory budget fails its step as an upstream's does (response.failed, server_error, naming
// the budget) once what it accrued fills the budget, instead of being held whole; everything
// it held is given back. (Over SSE the client's pace holds the writer back; over a WebSocket a
// client that also falls 64 KiB behind on a full budget is dropped instead, the write
// queue's rule: TestUnreadAnswersCountedInBudget covers that shape.)
func TestAnswerOverBudgetFails(t *testing.T) {
	const budget = 256 << 10
	s, url := testServer(t, Options{MaxMemory: budget, Limits: session.Limits{MaxFrame: 64 << 10}})
	b := s.Budget()
	resp, err := http.Post(httpURL(url, "/v1/responses"), "application/json", strings.NewReader(postBody(longAnswer(), true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20) // a terminal event carries the whole answer
	var last wstest.Frame
	text := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if strings.HasPrefix(data, `{"type":"response.output_text.delta"`) {
			var d struct{ Delta string }
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				t.Fatal(err)
			}
			text += len(d.Delta)
			continue
		}
		last = nil
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			t.Fatalf("an event that is not a JSON object: %q", data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	msg := last.Str("response", "error", "message")
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != "server_error" ||
		!strings.Contains(msg, "memory budget (-max-memory)") || !strings.Contains(msg, "the model's output") {
		t.Fatalf("%s after %d bytes of text: want response.failed, server_error naming the memory budget: %v", last.Type(), text, last)
	}
	if text == 0 || text > budget/2 {
		t.Fatalf("%d bytes of text streamed before the failure: want some, at most the budget's %d at 2 a byte", text, budget)
	}
	t.Logf("failed after %d bytes of text: %s", text, msg)
	waitFor(t, func() bool { return b.InUse() == 0 })
}

// TestAnswerOverBudgetFailsHTTP is TestAnswerOverBudgetFails over HTTP without a stream, where
// no event is written while the step runs: the answer fails as it accrues, not once it is
// whole.
func TestAnswerOverBudgetFailsHTTP(t *testing.T) {
	const budget = 1 << 20
	s, url := testServer(t, Options{MaxMemory: budget, Limits: session.Limits{MaxFrame: 64 << 10}})
	b := s.Budget()
	code, r := do(t, "POST", httpURL(url, "/v1/responses"), "", postBody(longAnswer(), false))
	f := wstest.Frame(r)
	msg := f.Str("error", "message")
	if code != http.StatusOK || f.Str("status") != "failed" || f.Str("error", "code") != "server_error" ||
		!strings.Contains(msg, "memory budget (-max-memory)") || !strings.Contains(msg, "the model's output") {
		t.Fatalf("POST: %d %v; want a failed Response, server_error naming the memory budget", code, r)
	}
	t.Logf("failed: %s", msg)
	waitFor(t, func() bool { return b.InUse() == 0 })
}

// TestAnswerParksSuspendedRollouts: when suspended live rollouts hold the memory budget, an
// answer that needs room as it accrues has them parked to make it, as a create does, instead
// of failing: it completes, and the parked rollouts resume hot.
func TestAnswerParksSuspendedRollouts(t *testing.T) {
	const budget, suspended = 512 << 10, 20
	s, url := testServer(t, Options{MaxMemory: budget, Limits: session.Limits{MaxFrame: 64 << 10, ParkAfter: time.Hour, SuspendTimeout: time.Minute}})
	c := dialAppend(t, url)
	var first [2]string
	for i := range suspended {
		id, call, _ := suspendCalls(t, c, false)
		if i == 0 {
			first = [2]string{id, call}
		}
	}
	m := s.Metrics()
	parks := m.PressureParks.Load()
	// About 110 KiB counted as it accrues, over HTTP: no frame of it queued on a WebSocket.
	code, r := do(t, "POST", httpURL(url, "/v1/responses"), "",
		postBody(create("a long one", map[string]string{simmeta.AnswerTokens: "10000"}), false))
	if f := wstest.Frame(r); code != http.StatusOK || f.Str("status") != "completed" {
		t.Fatalf("POST: %d %s %v after %d rollouts parked", code, f.Str("status"), f.Get("error"), m.PressureParks.Load()-parks)
	}
	if m.PressureParks.Load() == parks {
		t.Fatalf("the answer completed in a budget of %d held by %d suspended rollouts without parking one: the test proves nothing",
			budget, suspended)
	}
	t.Logf("%d suspended rollouts parked to make room for the answer; budget %d of %d",
		m.PressureParks.Load()-parks, s.Budget().InUse(), budget)
	appendTo(c, first[0], first[1]) // the longest suspended, parked first
	fs := c.Until("response.done")
	if last := fs[len(fs)-1]; last.Str("response_id") != first[0] {
		t.Fatalf("resumed %s: %v", first[0], last)
	}
	if m.Unparks.Load() == 0 {
		t.Fatal("the oldest rollout was not parked")
	}
}
