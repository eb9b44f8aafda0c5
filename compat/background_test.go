package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// bgCreate is a background create body.
func bgCreate(input string, extra map[string]any) map[string]any {
	m := map[string]any{"model": "sim", "input": input, "background": true}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// do sends method path with a JSON body (nil: none) under ctx and returns the response.
func do(t *testing.T, ctx context.Context, method, url string, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// jsonAnswer reads resp's JSON body; it fails the test unless the status is want.
func jsonAnswer(t *testing.T, resp *http.Response, want int) wstest.Frame {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, raw, want)
	}
	var f wstest.Frame
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return f
}

// sseStream reads the events of an SSE answer one by one.
type sseStream struct {
	t     *testing.T
	resp  *http.Response
	sc    *bufio.Scanner
	event string
}

func openSSE(t *testing.T, resp *http.Response) *sseStream {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%d %s %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{t: t, resp: resp, sc: sc}
}

// next returns the next event, or nil at the end of the stream.
func (s *sseStream) next() wstest.Frame {
	s.t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			s.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var f wstest.Frame
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f); err != nil {
				s.t.Fatalf("bad data line %q", line)
			}
			if f.Type() != s.event {
				s.t.Fatalf("event: %s but data type %s", s.event, f.Type())
			}
			return f
		case line == "":
		default:
			s.t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return nil
}

// rest returns the remaining events; the stream must end after a terminal event.
func (s *sseStream) rest() []wstest.Frame {
	s.t.Helper()
	var fs []wstest.Frame
	for f := s.next(); f != nil; f = s.next() {
		fs = append(fs, f)
	}
	if len(fs) == 0 || !isTerminal(fs[len(fs)-1].Type()) {
		s.t.Fatalf("the stream does not end with a terminal event: %d events", len(fs))
	}
	return fs
}

func isTerminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}

func seq(t *testing.T, f wstest.Frame) int {
	t.Helper()
	n, ok := f.Int("sequence_number")
	if !ok {
		t.Fatalf("no sequence_number: %v", f)
	}
	return n
}

// checkSeq checks that fs are numbered from first on without a gap.
func checkSeq(t *testing.T, fs []wstest.Frame, first int) {
	t.Helper()
	for i, f := range fs {
		if n := seq(t, f); n != first+i {
			t.Fatalf("event %d (%s) has sequence_number %d, want %d", i, f.Type(), n, first+i)
		}
	}
}

// TestBackgroundPollAndResume: a background create answers at once with its Response (queued
// or in progress, background true) while the sim still samples; GET polls it; GET
// ?stream=true replays every event from sequence_number 0 and follows the live ones to
// response.completed (the public grammar holds); ?starting_after=N replays exactly the events
// after N; once it has ended GET answers the stored Response, and its events stay.
func TestBackgroundPollAndResume(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("a long answer", map[string]any{"metadata": slow("40")})), 200)
	id := created.Str("id")
	if st := created.Str("status"); st != "queued" && st != "in_progress" {
		t.Fatalf("the create answered status %q, want queued or in_progress", st)
	}
	if created.Get("background") != true {
		t.Fatalf("background %v, want true", created.Get("background"))
	}
	polled := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200)
	if st := polled.Str("status"); st != "queued" && st != "in_progress" && st != "completed" {
		t.Fatalf("poll: status %q", st)
	}

	// Past the last event while it runs: the stream ends with an error event, never empty.
	if resp := do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true&starting_after=100000", nil); resp.StatusCode == 200 {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := string(raw); strings.Count(got, "event: ") != 1 || !strings.HasPrefix(got, "event: error\n") || !strings.Contains(got, `"code":"invalid_value"`) {
			t.Fatalf("a starting_after past the end of a running response streamed %q, want one invalid_value error event", got)
		}
	} else if e := jsonAnswer(t, resp, 400); e.Str("error", "code") != "invalid_value" { // it had ended
		t.Fatalf("a starting_after past the end: %v", e)
	}

	all := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil)).rest()
	wstest.CheckGrammar(t, conformance.ShapePublic, all)
	checkSeq(t, all, 0)
	if final(all).Type() != "response.completed" || final(all).Str("response", "id") != id {
		t.Fatalf("the stream ends with %v", final(all))
	}

	done := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200)
	if done.Str("status") != "completed" || done.Get("background") != true {
		t.Fatalf("after the end GET answers status %q background %v", done.Str("status"), done.Get("background"))
	}
	const n = 3
	tail := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true&starting_after=3", nil)).rest()
	checkSeq(t, tail, n+1)
	if len(tail) != len(all)-n-1 {
		t.Fatalf("starting_after=%d replayed %d events, want %d", n, len(tail), len(all)-n-1)
	}
	for i := range tail {
		if !bytes.Equal(mustJSON(t, tail[i]), mustJSON(t, all[n+1+i])) {
			t.Fatalf("replayed event %d differs:\n%v\n%v", i, tail[i], all[n+1+i])
		}
	}
	for _, after := range []string{"100000", strconv.FormatInt(math.MaxInt64, 10)} {
		past := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true&starting_after="+after, nil), 400)
		if past.Str("error", "code") != "invalid_value" || past.Str("error", "param") != "starting_after" ||
			!strings.Contains(past.Str("error", "message"), "starting_after "+after+" is past the last event") {
			t.Fatalf("a starting_after past the end (%s): %v", after, past)
		}
	}
	if f.srv.Background().Running() != 0 {
		t.Fatalf("%d background responses still running", f.srv.Background().Running())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBackgroundClientGoes: a streamed background create whose client goes after three events
// runs on; a new GET ?stream=true&starting_after=2 picks the stream up at sequence_number 3
// and follows it to response.completed.
func TestBackgroundClientGoes(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	ctx, cancel := context.WithCancel(t.Context())
	first := openSSE(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("go away", map[string]any{"stream": true, "metadata": slow("60")})))
	var head []wstest.Frame
	for range 3 {
		head = append(head, first.next())
	}
	cancel() // the client goes
	id := head[0].Str("response", "id")
	if head[0].Get("response", "background") != true {
		t.Fatalf("response.created without background true: %v", head[0])
	}
	rest := openSSE(t, do(t, t.Context(), "GET", f.base+"/responses/"+id+"?stream=true&starting_after=2", nil)).rest()
	all := append(head, rest...)
	checkSeq(t, all, 0)
	wstest.CheckGrammar(t, conformance.ShapePublic, all)
	if final(all).Type() != "response.completed" {
		t.Fatalf("the response ended %s", final(all).Type())
	}
}

// TestBackgroundCancel: POST …/cancel ends a running background response with status
// cancelled (its stream with response.incomplete carrying it), GET then answers it, a second
// cancel answers it again; cancelling a response created without background is 400
// response_not_background, a completed background one 400 response_already_completed, an
// unknown one 404; background with store:false is 400 invalid_value on store. No background
// response is left running.
func TestBackgroundCancel(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200)
	id := created.Str("id")
	follow := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil))
	if ev := follow.next(); ev.Type() != "response.created" {
		t.Fatalf("first event %s", ev.Type())
	}
	cancelled := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/"+id+"/cancel", nil), 200)
	if cancelled.Str("status") != "cancelled" || cancelled.Str("id") != id {
		t.Fatalf("cancel answered %v", cancelled)
	}
	rest := follow.rest()
	if end := final(rest); end.Type() != "response.incomplete" || end.Str("response", "status") != "cancelled" {
		t.Fatalf("the stream ends %s status %s, want response.incomplete status cancelled", end.Type(), end.Str("response", "status"))
	}
	if got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200); got.Str("status") != "cancelled" {
		t.Fatalf("GET after cancel: status %q", got.Str("status"))
	}
	if again := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/"+id+"/cancel", nil), 200); again.Str("status") != "cancelled" {
		t.Fatalf("second cancel: %v", again)
	}

	fg := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", map[string]any{"model": "sim", "input": "hi"}), 200)
	e := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/"+fg.Str("id")+"/cancel", nil), 400)
	if e.Str("error", "code") != "response_not_background" || e.Str("error", "message") != "Cannot cancel a synchronous response." {
		t.Fatalf("cancel of a synchronous response: %v", e)
	}
	quick := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("hi", nil)), 200)
	openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+quick.Str("id")+"?stream=true", nil)).rest() // until it ends
	e = jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/"+quick.Str("id")+"/cancel", nil), 400)
	if e.Str("error", "code") != "response_already_completed" || e.Str("error", "message") != "Cannot cancel a completed response." {
		t.Fatalf("cancel of a completed background response: %v", e)
	}
	jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses/resp_unknown/cancel", nil), 404)
	e = jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("hi", map[string]any{"store": false})), 400)
	if e.Str("error", "code") != "invalid_value" || e.Str("error", "param") != "store" {
		t.Fatalf("background with store:false: %v", e)
	}
	if n := f.srv.Background().Running(); n != 0 {
		t.Fatalf("%d background responses still running", n)
	}
}

// TestBackgroundEventBound: with room for a few events per response, a finished long
// response keeps only its newest events: a resume from the start is 400
// response_events_expired naming the first kept sequence_number, a resume after it works,
// and the bytes counted in the memory budget go back once the events are forgotten.
func TestBackgroundEventBound(t *testing.T) {
	f := newFixture(t, server.Options{BackgroundEventBytes: 4000, BackgroundKeep: time.Hour})
	ctx := t.Context()
	before := f.srv.Budget().InUse()
	created := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("many words", map[string]any{"metadata": map[string]string{"sim.answer_tokens": "100"}})), 200)
	id := created.Str("id")
	select {
	case <-f.srv.Background().Done(id, ""):
	case <-ctx.Done():
		t.Fatal("the background response did not end")
	}
	if held := f.srv.Budget().InUse() - before; held <= 0 {
		t.Fatalf("the kept events hold %d bytes of the budget, want them counted", held)
	}
	e := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil), 400)
	if e.Str("error", "code") != "response_events_expired" || e.Str("error", "param") != "starting_after" ||
		!strings.Contains(e.Str("error", "message"), "no longer kept") {
		t.Fatalf("a resume from the start: %v", e)
	}
	var firstKept int
	msg := e.Str("error", "message")
	if i := strings.Index(msg, "starting_after "); i < 0 {
		t.Fatalf("the message does not say where to resume: %q", msg)
	} else if _, err := fmt.Sscan(msg[i+len("starting_after "):], &firstKept); err != nil {
		t.Fatalf("%q: %v", msg, err)
	}
	tail := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true&starting_after="+strconv.Itoa(firstKept), nil)).rest()
	checkSeq(t, tail, firstKept+1)
	f.srv.Background().Close()
	if held := f.srv.Budget().InUse() - before; held != 0 {
		t.Fatalf("%d bytes of the budget still held after the events were forgotten", held)
	}
}

// TestBackgroundShutdown: a server that shuts down while a background response samples ends
// it within the grace (response.incomplete, server_shutdown, kept for its followers) and
// holds no goroutine of it afterwards (goleak, TestMain).
func TestBackgroundShutdown(t *testing.T) {
	f := newFixture(t, realtime(server.Options{Limits: session.Limits{ShutdownGrace: time.Millisecond}}))
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200)
	follow := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+created.Str("id")+"?stream=true", nil))
	if ev := follow.next(); ev.Type() != "response.created" {
		t.Fatalf("first event %s", ev.Type())
	}
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	end := final(follow.rest())
	if end.Type() != "response.incomplete" || end.Str("response", "incomplete_details", "reason") != "server_shutdown" {
		t.Fatalf("the response ended %s %v", end.Type(), end.Get("response", "incomplete_details"))
	}
	if n := f.srv.Background().Running(); n != 0 {
		t.Fatalf("%d background responses still running after the shutdown", n)
	}
}

// TestBackgroundFailedPolled: a background response that the model refuses (input past the
// sim's context window) ends failed, and GET answers that failed Response while its events are
// kept, as a poller (the SDKs' background helpers) needs: a failed Response is not stored, and
// GET answered 404 response_not_found once it had ended.
func TestBackgroundFailedPolled(t *testing.T) {
	f := windowFixture(t, 2000)
	ctx := t.Context()
	created := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate(strings.Repeat("lorem ipsum dolor sit amet ", 500), nil)), 200)
	id := created.Str("id")
	select {
	case <-f.srv.Background().Done(id, ""):
	case <-ctx.Done():
		t.Fatal("the background response did not end")
	}
	got := jsonAnswer(t, do(t, ctx, "GET", f.base+"/responses/"+id, nil), 200)
	if got.Str("id") != id || !windowFailed(got, "2000") || got.Get("background") != true {
		t.Fatalf("GET of the failed background response: %v", got)
	}
}
