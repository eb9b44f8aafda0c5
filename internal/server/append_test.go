package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "internal/server")) }

var (
	shell   = map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}}
	weather = map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []string{"location"}}}
	clock   = map[string]any{"type": "function", "name": "get_time", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
)

func create(input string, meta map[string]string, tools ...any) map[string]any {
	m := map[string]any{"type": "response.create", "model": "sim", "input": input, "tools": tools}
	if meta != nil {
		m["metadata"] = meta
	}
	return m
}

func TestUpgradeConfirmsOptIn(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	if got := c.Resp.Header.Get("OpenAI-Beta"); got != AppendBeta {
		t.Fatalf("101 OpenAI-Beta = %q, want %q", got, AppendBeta)
	}
}

func TestTwentyToolCallRollout(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	fs := rollout(t, c, create("Fix the failing build.", map[string]string{"sim.calls": "20"}, shell), func(id, args string) string {
		return "output of " + args
	})
	dones, calls := 0, 0
	for _, f := range fs {
		switch {
		case f.Type() == "response.done":
			dones++
			if n := len(pendingIDs(f)); n != 1 {
				t.Fatalf("response.done with %d pending calls, want 1", n)
			}
		case f.Type() == "response.output_item.done" && f.Str("item", "type") == "function_call":
			calls++
			if !strings.Contains(f.Str("item", "arguments"), "echo") {
				t.Errorf("shell tool not given an echo command: %s", f.Str("item", "arguments"))
			}
		}
	}
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" || dones != 20 || calls != 20 {
		t.Fatalf("terminal %s after %d suspensions and %d calls, want completed after 20", last.Type(), dones, calls)
	}
	out, _ := last.Get("response", "output").([]any)
	if len(out) != 21 {
		t.Fatalf("final output has %d items, want 20 calls + 1 message", len(out))
	}
	answer := finalText(last)
	if !strings.Contains(answer, "Fix the failing build.") || !strings.Contains(answer, "output of") {
		t.Errorf("answer does not quote the context: %q", answer)
	}
	u := last.Get("response", "usage").(map[string]any)
	in, cached := u["input_tokens"].(float64), u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	if in <= 0 || cached <= 0 || cached >= in || u["output_tokens"].(float64) <= 0 {
		t.Errorf("usage not plausible for a resumed rollout: %v", u)
	}
}

func finalText(f wstest.Frame) string {
	out, _ := f.Get("response", "output").([]any)
	for _, it := range out {
		m := wstest.Frame(it.(map[string]any))
		if m.Str("type") == "message" {
			parts, _ := m.Get("content").([]any)
			if len(parts) > 0 {
				return wstest.Frame(parts[0].(map[string]any)).Str("text")
			}
		}
	}
	return ""
}

func TestParallelCallsRejectedThenGoodAppend(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.Send(create("Weather and time in Paris?", map[string]string{"sim.parallel": "2"}, weather, clock))
	fs := c.Until("response.done")
	done := fs[len(fs)-1]
	ids := pendingIDs(done)
	if len(ids) != 2 {
		t.Fatalf("want 2 parallel calls, got %v", done)
	}
	rid := done.Str("response_id")
	// Only one output: rejected, rollout stays suspended.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "18C"}}})
	e := c.ExpectError(400, "missing_tool_output", "input")
	if want := "No tool output found for function call " + ids[1] + "."; e.Str("error", "message") != want {
		t.Errorf("message %q, want %q", e.Str("error", "message"), want)
	}
	// Duplicate output: rejected.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "18C"},
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "18C"}}})
	c.ExpectError(400, "duplicate_tool_output", "input")
	// Unknown call: rejected.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": "call_nope", "output": "x"}}})
	c.ExpectError(400, "tool_call_not_found", "input")
	// Appended items are held to a create's bounds of input items: rejected, nothing applied.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[1], "output": "14:05"},
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "18C"},
		map[string]any{"type": "message", "role": "assistant", "phase": "draft", "content": "x"}}})
	c.ExpectError(400, "invalid_value", "input[2].phase")
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": strings.Repeat("c", 65), "output": "x"}}})
	c.ExpectError(400, "string_above_max_length", "input[0].call_id")
	// Both, in reverse order: resumes.
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": ids[1], "output": "14:05"},
		map[string]any{"type": "function_call_output", "call_id": ids[0], "output": "18C"}}})
	rest := c.Until("response.completed")
	if rest[0].Type() != "response.output_item.added" || rest[0].Num("sequence_number") != done.Num("sequence_number")+1 {
		t.Fatalf("resume must continue the rollout's sequence directly: %v", rest[0])
	}
	checkGrammar(t, append(fs, rest...))
	if a := finalText(rest[len(rest)-1]); !strings.Contains(a, "18C") || !strings.Contains(a, "14:05") {
		t.Errorf("answer does not quote both outputs: %q", a)
	}
}

func TestCancel(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.Send(create("hi", nil, shell))
	fs := c.Until("response.done")
	rid := fs[len(fs)-1].Str("response_id")
	c.Send(map[string]any{"type": "response.cancel", "response_id": rid})
	fs = append(fs, c.Until("response.incomplete")...)
	checkGrammar(t, fs)
	last := fs[len(fs)-1]
	if last.Str("response", "incomplete_details", "reason") != "cancelled" {
		t.Fatalf("want reason cancelled: %v", last)
	}
	c.Send(map[string]any{"type": "response.cancel", "response_id": rid})
	c.ExpectError(409, "response_already_completed", "response_id")
	c.Send(map[string]any{"type": "response.cancel", "response_id": "resp_unknown"})
	c.ExpectError(404, "response_not_found", "response_id")
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{}})
	c.ExpectError(409, "response_not_suspended", "response_id")
	c.Send(map[string]any{"type": "response.append", "response_id": "resp_unknown", "input": []any{}})
	c.ExpectError(404, "response_not_found", "response_id")
}

func TestTwoRolloutsOneConnection(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.Send(create("first task", nil, shell))
	a := c.Until("response.done")
	aid := a[len(a)-1].Str("response_id")
	// A is suspended; B samples to completion meanwhile.
	b := rollout(t, c, create("second task", map[string]string{}), nil)
	if b[len(b)-1].Type() != "response.completed" || b[0].Str("response", "id") == aid {
		t.Fatalf("second rollout did not complete on its own: %v", b[len(b)-1])
	}
	c.Send(map[string]any{"type": "response.append", "response_id": aid, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(a[len(a)-1])[0], "output": "done"}}})
	a = append(a, c.Until("response.completed")...)
	checkGrammar(t, a)
	if txt := finalText(a[len(a)-1]); strings.Contains(txt, "second task") || !strings.Contains(txt, "first task") {
		t.Errorf("rollouts' contexts mixed: %q", txt)
	}
}

func TestQueuedCreateWaitsForSamplingRollout(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	// Two creates back to back: the second's events start only after the first's terminal.
	c.Send(create("one", nil))
	c.Send(create("two", nil))
	first := c.Until("response.completed")
	second := c.Until("response.completed")
	checkGrammar(t, first)
	checkGrammar(t, second)
	if first[0].Str("response", "id") == second[0].Str("response", "id") {
		t.Fatal("same id")
	}
}

func TestPreviousResponseIDOfFinishedRollout(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	r1 := rollout(t, c, create("Remember the code word: cobalt", nil), nil)
	id := r1[0].Str("response", "id")
	m := create("What is the code word?", nil)
	m["previous_response_id"] = id
	r2 := rollout(t, c, m, nil)
	if txt := finalText(r2[len(r2)-1]); !strings.Contains(txt, "cobalt") {
		t.Fatalf("continuation lost the parent's context: %q", txt)
	}
	if r2[0].Str("response", "previous_response_id") != id {
		t.Errorf("previous_response_id not echoed")
	}
	m["previous_response_id"] = "resp_missing"
	c.Send(m)
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
}

func TestOrphanToolOutputOnCreate(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": []any{
		map[string]any{"type": "function_call_output", "call_id": "call_missing", "output": "x"}}})
	c.ExpectError(400, "tool_call_not_found", "input")
	rollout(t, c, create("still usable", nil), nil)
}

func TestBadFrames(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	cases := []struct {
		frame       string
		status      int
		code, param string
	}{
		{`hello`, 400, "invalid_json", ""},
		{`{"type":"response.create","model":"m"`, 400, "invalid_json", ""},
		{`[1,2]`, 400, "invalid_json", ""},
		{`{"model":"m","input":"hi"}`, 400, "missing_required_parameter", "type"},
		{`{"type":null,"model":"m"}`, 400, "missing_required_parameter", "type"},
		{`{"type":"response.nope"}`, 400, "unknown_event_type", "type"},
		{`{"type":"response.create","input":"hi"}`, 400, "missing_required_parameter", "model"},
		{`{"type":"response.create","model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":5}]}]}`, 400, "invalid_type", "input[0].content[0].text"},
		{`{"type":"response.create","model":"m","max_output_tokens":"ten"}`, 400, "invalid_type", "max_output_tokens"},
		{`{"type":"response.create","model":"m","input":[{"role":"wizard","content":"hi"}]}`, 400, "invalid_value", "input[0].role"},
		{`{"type":"response.create","model":"m","temperature":1e400}`, 400, "invalid_type", "temperature"},
		{`{"type":"response.create","model":"m","temperature":9}`, 400, "decimal_above_max_value", "temperature"},
		{`{"type":5,"model":"m","temperature":9}`, 400, "invalid_type", "type"},
		{`{"type":true,"model":"m","temperature":9}`, 400, "invalid_type", "type"},
		{`{"model":"m","type":{},"temperature":9}`, 400, "invalid_type", "type"},
		{`{"model":"m","temperature":9,"type":[]}`, 400, "invalid_type", "type"},
		{`{"type":"response.create","model":"m","background":true}`, 400, "unsupported_parameter", "background"},
		{`{"type":"response.create","model":"m","stream_id":""}`, 400, "invalid_stream_id", "stream_id"},
		{`{"type":"response.create","model":"m","stream_id":"a b"}`, 400, "invalid_stream_id", "stream_id"},
		{`{"type":"response.create","model":"m","generate":false}`, 400, "unsupported_parameter", "generate"},
		// a carried member of a bounded scalar given as an object or an array
		{`{"type":"response.create","model":"m","input":[{"type":"message","role":"assistant","phase":{},"content":"x"}]}`, 400, "invalid_type", "input[0].phase"},
		{`{"type":"response.append","response_id":"resp_x","input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":[]}]}]}`, 400, "invalid_type", "input[0].content[0].detail"},
		// event_id, the client's correlation id, is a string
		{`{"type":"response.create","model":"m","input":"hi","event_id":{}}`, 400, "invalid_type", "event_id"},
		{`{"type":"response.cancel","response_id":"resp_x","event_id":5}`, 400, "invalid_type", "event_id"},
		{`{"type":"response.append","input":[]}`, 400, "missing_required_parameter", "response_id"},
		{`{"type":"response.append","response_id":"resp_x","input":[]}`, 404, "response_not_found", "response_id"},
		{`{"type":"response.cancel","response_id":"resp_x"}`, 404, "response_not_found", "response_id"},
	}
	for _, tc := range cases {
		c.SendRaw(tc.frame)
		t.Run(tc.code+"/"+tc.frame[:min(len(tc.frame), 30)], func(t *testing.T) {
			c.T = t
			c.ExpectError(tc.status, tc.code, tc.param)
		})
	}
	c.T = t
	// A binary frame.
	if err := c.C.Write(t.Context(), websocket.MessageBinary, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	c.ExpectError(400, "unsupported_frame", "")
	// The socket is still usable.
	fs := rollout(t, c, create("after the bad frames", nil), nil)
	if fs[len(fs)-1].Type() != "response.completed" {
		t.Fatalf("socket unusable after bad frames")
	}
}

// TestCreateBodyTypeIgnored: a POST /v1/responses body's "type" member is ignored whatever its
// kind, and the body is held to the create's bounds all the same.
func TestCreateBodyTypeIgnored(t *testing.T) {
	_, url := testServer(t, Options{})
	for _, typ := range []string{`5`, `true`, `{}`, `[]`, `"foo"`, `null`, `"response.create"`} {
		code, body := do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","type":`+typ+`,"temperature":9,"input":"hi"}`)
		e, _ := body["error"].(map[string]any)
		if code != 400 || e["code"] != "decimal_above_max_value" || e["param"] != "temperature" {
			t.Errorf("type %s, temperature 9: %d %v, want 400 decimal_above_max_value temperature", typ, code, body)
		}
		code, body = do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","type":`+typ+`,"temperature":1,"input":"hi"}`)
		if code != 200 || body["status"] != "completed" {
			t.Errorf("type %s, temperature 1: %d %v, want 200 completed", typ, code, body)
		}
	}
}

func TestAppendToRunningRollout(t *testing.T) {
	_, url := testServer(t, Options{Model: slowModel()})
	c := dialAppend(t, url)
	c.Send(create("a long answer please", nil))
	fs := c.Until("response.output_item.added")
	rid := fs[0].Str("response", "id")
	c.Send(map[string]any{"type": "response.append", "response_id": rid, "input": []any{}})
	c.ExpectErrorSkipping(409, "response_not_suspended", "response_id")
}

func TestOversizeFrameClosesWith1009(t *testing.T) {
	_, url := testServer(t, Options{Limits: session.Limits{MaxFrame: 1024}})
	c := dialAppend(t, url)
	c.SendRaw(fmt.Sprintf(`{"type":"response.create","model":"m","input":%q}`, strings.Repeat("x", 2000)))
	c.ExpectError(413, "websocket_message_too_large", "")
	c.ExpectClose(websocket.StatusMessageTooBig)
}

func TestCancelOfSuspendedRolloutWaitsForSamplingOne(t *testing.T) {
	_, url := testServer(t, Options{Model: slowModel()})
	c := dialAppend(t, url)
	c.Send(create("first", nil, shell))
	a := c.Until("response.done")
	aid := a[len(a)-1].Str("response_id")
	c.Send(create("second", map[string]string{"sim.answer_tokens": "40"}))
	c.Until("response.output_text.delta")
	c.Send(map[string]any{"type": "response.cancel", "response_id": aid})
	// The cancelled rollout's terminal event must not interleave with the sampling one's.
	var bid string
	for {
		f := c.Next()
		if f.Type() == "response.incomplete" && f.Str("response", "id") == aid {
			if bid == "" {
				t.Fatalf("the cancelled rollout's response.incomplete interleaved with the sampling rollout's events")
			}
			return
		}
		if f.Type() == "response.completed" {
			bid = f.Str("response", "id")
		}
	}
}

func TestAppendRolloutsAreStored(t *testing.T) {
	s, url := testServer(t, Options{})
	_ = s
	c := dialAppend(t, url)
	fs := rollout(t, c, create("Remember: violet", map[string]string{"sim.calls": "2"}, shell), func(id, args string) string { return "ran " + args })
	id := fs[0].Str("response", "id")
	// GET over HTTP.
	resp, err := http.Get(strings.Replace(strings.Replace(url, "ws", "http", 1), "/v1/responses", "/v1/responses/"+id, 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET of a stored append rollout: %d", resp.StatusCode)
	}
	// A new append connection continues it by previous_response_id (from the store).
	c2 := dialAppend(t, url)
	m := create("What colour?", nil)
	m["previous_response_id"] = id
	r2 := rollout(t, c2, m, nil)
	if txt := finalText(r2[len(r2)-1]); !strings.Contains(txt, "violet") || !strings.Contains(txt, "ran ") {
		t.Fatalf("stored chain lost: %q", txt)
	}
}

func TestUnknownEventTypeListsThisShapesTypes(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	c.SendRaw(`{"type":"bogus"}`)
	e := c.ExpectError(400, "unknown_event_type", "type")
	if msg := e.Str("error", "message"); !strings.Contains(msg, "'bogus'") || !strings.Contains(msg, "response.append") || strings.Contains(msg, "response.steer") {
		t.Fatalf("message %q", msg)
	}
}

// TestColdContinuationIsAnnounced: in the append shape a create with previous_response_id
// rebuilds the context; its response.created says so with the continuation member (why: the
// parent ended on this connection, or was read from the store), and a debug log line names
// the reason. A create without previous_response_id has no continuation member.
func TestColdContinuationIsAnnounced(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	log := slog.New(recordHandler(func(r slog.Record) {
		if r.Message != "continuation went cold" || r.Level != slog.LevelDebug {
			return
		}
		line := ""
		r.Attrs(func(a slog.Attr) bool { line += a.Key + "=" + a.Value.String() + " "; return true })
		mu.Lock()
		logged = append(logged, line)
		mu.Unlock()
	}))
	_, url := testServer(t, Options{Logger: log})
	c := dialAppend(t, url)
	r1 := rollout(t, c, create("Remember the code word: cobalt", nil), nil)
	if r1[0].Get("continuation") != nil {
		t.Fatalf("a new rollout's response.created has a continuation member: %v", r1[0])
	}
	id := r1[0].Str("response", "id")
	m := create("What is the code word?", nil)
	m["previous_response_id"] = id
	r2 := rollout(t, c, m, nil)
	checkGrammar(t, r2)
	want := map[string]any{"path": "cold", "reason": "not_suspended"}
	if got, _ := r2[0].Get("continuation").(map[string]any); !reflect.DeepEqual(got, want) {
		t.Errorf("continuation of an ended rollout: %v, want %v", r2[0].Get("continuation"), want)
	}
	// From another connection: read from the store.
	r3 := rollout(t, dialAppend(t, url), m, nil)
	want = map[string]any{"path": "cold", "reason": "not_on_connection"}
	if got, _ := r3[0].Get("continuation").(map[string]any); !reflect.DeepEqual(got, want) {
		t.Errorf("continuation from the store: %v, want %v", r3[0].Get("continuation"), want)
	}
	if r1[1].Get("continuation") != nil || r2[1].Get("continuation") != nil {
		t.Errorf("response.in_progress carries a continuation member")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, fs := range [][]wstest.Frame{r2, r3} {
		prefix := "response=" + fs[0].Str("response", "id") + " previous_response_id=" + id + " reason=" + []string{"not_suspended", "not_on_connection"}[i]
		found := false
		for _, l := range logged {
			found = found || strings.HasPrefix(l, prefix)
		}
		if !found {
			t.Errorf("no debug line %q in %q", prefix, logged)
		}
	}
}

// recordHandler is a slog.Handler that passes every record to f.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }
