package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// httpDo sends one HTTP request to base+path with body (nil for none) and returns the status,
// the Content-Type and the body. It fails the scenario if the server does not answer within
// the timeout.
func (t *T) httpDo(method, path string, body []byte) (int, string, []byte) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.r.httpBase+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.cfg.APIKey)
	}
	resp, err := t.r.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
}

// httpJSON sends v as JSON and decodes the JSON answer.
func (t *T) httpJSON(method, path string, v any) (int, Frame, []byte) {
	var b []byte
	if v != nil {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	}
	status, _, raw := t.httpDo(method, path, b)
	f, err := decodeFrame(raw)
	if err != nil {
		t.fail(&Failure{Message: fmt.Sprintf("%s %s: the body is not a JSON object: %v", method, path, err),
			Expected: "a JSON object", Received: clip(string(raw), 400)})
	}
	return status, f, raw
}

// postResponse POSTs a create body (stream:false) and returns the Response, which must be 200,
// valid against the schema (with -schema), and internally consistent.
func (t *T) postResponse(create M) Frame {
	b := body(create)
	b["stream"] = false
	status, f, raw := t.httpJSON("POST", "/responses", b)
	if status != http.StatusOK {
		t.fail(&Failure{Message: fmt.Sprintf("POST /responses: status %d", status), Expected: "200 and a Response", Received: clip(string(raw), 600)})
	}
	t.checkResponseBody(f, raw)
	if !t.ids.add("response", f.Str("id")) {
		t.Fatalf("POST /responses returned the response id %s, which was used before", f.Str("id"))
	}
	return f
}

// checkResponseBody checks a Response object received over HTTP.
func (t *T) checkResponseBody(f Frame, raw []byte) {
	if t.r.schema != nil {
		if err := t.r.schema.validateResponse(raw); err != nil {
			t.fail(&Failure{Message: "schema: " + err.Error(), Received: clip(string(raw), 600)})
		}
	}
	if f.Str("id") == "" || f.Str("object") != "response" {
		t.fail(&Failure{Message: "not a Response object", Expected: `{"id":…,"object":"response",…}`, Received: clip(string(raw), 600)})
	}
}

// expectHTTPError checks an HTTP error answer: status, and the body
// {"error":{"message","type","param","code"}} with code and param ("" for null).
func (t *T) expectHTTPError(what string, status int, f Frame, raw []byte, wantStatus int, code, param string) {
	var pv any
	if param != "" {
		pv = param
	}
	want := M{"error": M{"code": code, "param": pv}}
	if code == "" {
		want = M{"error": M{}}
	}
	e := f.Obj("error")
	if status != wantStatus || !contains(f, want) || e.Str("message") == "" || e.Str("type") == "" {
		t.fail(&Failure{Message: what + ": wrong error answer",
			Expected: fmt.Sprintf("%d %s", wantStatus, compact(want)), Received: fmt.Sprintf("%d %s", status, clip(string(raw), 600))})
	}
}

// postSSE POSTs a create body with stream:true and returns the events of the Server-Sent
// Events stream, each checked against the public grammar (and the schema). The stream must
// use LF line ends only, name each event after its type, and end after the terminal event
// without a [DONE] line.
func (t *T) postSSE(create M, g *Grammar) *Turn {
	b := body(create)
	b["stream"] = true
	raw, _ := json.Marshal(b)
	status, ctype, data := t.httpDo("POST", "/responses", raw)
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/event-stream") {
		t.fail(&Failure{Message: "POST /responses with stream:true", Expected: "200 text/event-stream",
			Received: fmt.Sprintf("%d %s %s", status, ctype, clip(string(data), 400))})
	}
	fs := t.sseEvents(data, g)
	id := fs[0].Str("response", "id")
	tu := &Turn{ID: id, Stop: fs[len(fs)-1], Frames: fs, req: create}
	for _, v := range g.state(id).stop {
		m, _ := v.(map[string]any)
		tu.Items = append(tu.Items, Frame(m))
	}
	return tu
}

// sseEvents decodes a Server-Sent Events stream: each event checked against the public grammar
// g (nil: none, for a stream resumed in the middle of a response) and the schema, LF line ends only, each event named after its type, no [DONE] line, the
// last event terminal.
func (t *T) sseEvents(data []byte, g *Grammar) []Frame {
	if bytes.Contains(data, []byte("\r")) {
		t.Fatalf("the SSE stream has CR characters (LF only)")
	}
	var (
		fs    []Frame
		log   []string
		event string
	)
	failSSE := func(msg, expected, received string) {
		if len(log) > 12 {
			log = log[len(log)-12:]
		}
		t.fail(&Failure{Message: msg, Expected: expected, Received: received, Frames: append([]string{"the SSE stream:"}, log...)})
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			event = ""
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			payload := strings.TrimPrefix(line, "data: ")
			log = append(log, "← "+clip(payload, 400))
			if payload == "[DONE]" {
				failSSE("a [DONE] line (the stream ends after the terminal event)", "no [DONE]", line)
			}
			f, err := decodeFrame([]byte(payload))
			if err != nil {
				failSSE(fmt.Sprintf("an SSE data line that is not a JSON object: %v", err), "a JSON object", clip(payload, 400))
			}
			if f.Type() != event {
				failSSE("the SSE event name differs from the data's type", "event: "+f.Type(), "event: "+event)
			}
			if t.r.schema != nil {
				if err := t.r.schema.validateEvent(f, []byte(payload), false); err != nil {
					failSSE("schema: "+err.Error(), "", clip(payload, 600))
				}
			}
			if g != nil {
				if v := g.feed(f); v != "" {
					failSSE("grammar: "+v, "", clip(payload, 600))
				}
			}
			fs = append(fs, f)
		case strings.HasPrefix(line, ":"): // comment
		default:
			failSSE("an unexpected SSE line", "event:, data:, a comment or an empty line", clip(line, 200))
		}
	}
	if len(fs) == 0 || !isTerminal(fs[len(fs)-1].Type()) {
		failSSE("the SSE stream does not end with a terminal event", "response.completed, response.incomplete or response.failed last", fmt.Sprintf("%d events", len(fs)))
	}
	return fs
}

// httpContinuation is the create that continues tu over HTTP: previous_response_id and the
// chain's settings (the parent must be stored).
func httpContinuation(tu *Turn, input []any) M {
	m := M{}
	for k, v := range tu.req {
		if k != "input" && k != "previous_response_id" {
			m[k] = v
		}
	}
	m["input"] = input
	m["previous_response_id"] = tu.ID
	return m
}
