package responses_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/responses"
)

// scriptUpstream is a Responses WebSocket upstream that answers the n-th response.create it
// reads (counted from 1 across all its sockets) with the frames script(n) returns.
func scriptUpstream(t *testing.T, script func(n int) []string) string {
	t.Helper()
	var creates atomic.Int64
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		ctx := r.Context()
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
			for _, f := range script(int(creates.Add(1))) {
				if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(us.Close)
	return "ws" + strings.TrimPrefix(us.URL, "http") + "/v1/responses"
}

// answerFrames is a well-formed upstream answer: response id, one message of text.
func answerFrames(id, text string) []string {
	return []string{
		`{"type":"response.created","response":{"id":"` + id + `","status":"in_progress"}}`,
		frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}}),
		frameOf("response.output_text.delta", map[string]any{"output_index": 0, "delta": text}),
		frameOf("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text}}}}),
		`{"type":"response.completed","response":{"id":"` + id + `","status":"completed","usage":{"input_tokens":1,"output_tokens":1}}}`,
	}
}

// scriptFront starts a front Tether on a script upstream and dials a public-shape WebSocket.
func scriptFront(t *testing.T, script func(n int) []string) *wstest.Client {
	t.Helper()
	m, err := responses.New(responses.Options{URL: scriptUpstream(t, script), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, fr := startFront(t, server.Options{Model: m})
	return wstest.Dial(t, wsURL(fr), nil)
}

// TestUpstreamErrorMessageCut: an upstream error frame with a huge message fails the step
// naming the upstream's status and code, and quotes at most the start of its message.
func TestUpstreamErrorMessageCut(t *testing.T) {
	huge := strings.Repeat("upstream text ", 1<<16) // 896 KiB
	c := scriptFront(t, func(n int) []string {
		if n == 1 {
			return []string{frameOf("error", map[string]any{"status": 500, "error": map[string]any{"type": "server_error",
				"code": "boom", "message": huge}})}
		}
		return answerFrames(fmt.Sprintf("resp_%d", n), fmt.Sprintf("answer %d", n))
	})
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "one"})
	fs := c.Until("response.failed", "response.completed")
	last := fs[len(fs)-1]
	msg := last.Str("response", "error", "message")
	if last.Type() != "response.failed" || !strings.Contains(msg, "upstream error 500 boom: upstream text") {
		t.Fatalf("want response.failed naming the upstream's 500 boom, got %.300v", last)
	}
	if len(msg) > 1024 {
		t.Fatalf("the error message quotes %d bytes of the upstream's message", len(msg))
	}
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "two"})
	fs = c.Until("response.failed", "response.completed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" || answer(last) != "answer 2" {
		t.Fatalf("the next response on the connection: %v", last)
	}
}

// TestTerminalOfAnotherResponse: an upstream that ends a step with the terminal event of a
// response it did not create (before its response.created) fails the step, and the frames it
// sends after it never reach the connection's next response: each later response gets the
// answer to its own request.
func TestTerminalOfAnotherResponse(t *testing.T) {
	c := scriptFront(t, func(n int) []string {
		id, text := fmt.Sprintf("resp_%d", n), fmt.Sprintf("answer %d", n)
		if n == 1 {
			return append([]string{`{"type":"response.completed","response":{"id":"resp_other","status":"completed","output":[]}}`},
				answerFrames(id, text)...)
		}
		return answerFrames(id, text)
	})
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "one"})
	fs := c.Until("response.failed", "response.completed")
	if last := fs[len(fs)-1]; last.Type() != "response.failed" || last.Str("response", "error", "code") != "server_error" {
		t.Fatalf("a terminal event before response.created: want response.failed server_error, got %v", last)
	}
	for i := 2; i <= 3; i++ {
		c.Send(map[string]any{"type": "response.create", "model": "m", "input": fmt.Sprintf("request %d", i)})
		fs = c.Until("response.failed", "response.completed")
		if last := fs[len(fs)-1]; last.Type() != "response.completed" || answer(last) != fmt.Sprintf("answer %d", i) {
			t.Fatalf("response %d: want completed with %q, got %v", i, fmt.Sprintf("answer %d", i), last)
		}
	}
}

// TestUpstreamNegativeUsage: an upstream whose response.completed reports negative or absurd
// token counts gives the client counts between 0 and sampler.MaxStepTokens, never a negative
// one or one that sums past an int.
func TestUpstreamNegativeUsage(t *testing.T) {
	usages := []string{
		`{"input_tokens":-5,"input_tokens_details":{"cached_tokens":-7},"output_tokens":-3,"total_tokens":-8}`,
		`{"input_tokens":4611686018427387904,"input_tokens_details":{"cached_tokens":4611686018427387904},"output_tokens":4611686018427387904,"total_tokens":1}`,
	}
	for _, usage := range usages {
		c := scriptFront(t, func(n int) []string {
			f := answerFrames(fmt.Sprintf("resp_%d", n), "answer")
			f[len(f)-1] = `{"type":"response.completed","response":{"id":"resp_` + fmt.Sprint(n) + `","status":"completed",` +
				`"usage":` + usage + `}}`
			return f
		})
		c.Send(map[string]any{"type": "response.create", "model": "m", "input": "one"})
		fs := c.Until("response.failed", "response.completed")
		last := fs[len(fs)-1]
		if last.Type() != "response.completed" {
			t.Fatalf("want response.completed, got %v", last)
		}
		for _, path := range [][]string{{"input_tokens"}, {"output_tokens"}, {"total_tokens"}, {"input_tokens_details", "cached_tokens"}} {
			n, ok := last.Int(append([]string{"response", "usage"}, path...)...)
			if !ok || n < 0 || n > 2*sampler.MaxStepTokens {
				t.Fatalf("upstream usage %s: %v = %d (present %v), want 0…2×MaxStepTokens: %v", usage, path, n, ok, last.Get("response", "usage"))
			}
		}
	}
}

// TestModelsUpstreamDown: GET /v1/models on a front whose upstream refuses connections is a
// 502 of type server_error (a server's failure, not the request's).
func TestModelsUpstreamDown(t *testing.T) {
	us := httptest.NewServer(http.NotFoundHandler())
	down := us.URL
	us.Close() // nothing listens there any more
	m, err := responses.New(responses.Options{URL: down + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, fr := startFront(t, server.Options{Model: m})
	resp, err := http.Get(fr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Type, Code string }
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway || body.Error.Type != "server_error" || body.Error.Code != "server_error" {
		t.Fatalf("GET /v1/models with the upstream down: %d %+v, want 502 server_error/server_error", resp.StatusCode, body.Error)
	}
}

// TestNoEventsBeforeCreated: an upstream that streams on after an error frame leaves those
// frames on the socket (kept open for the connection's earlier response); the next step reads
// them before its own response.created and fails at the first, before it passes on any of
// their text, and the socket is closed: the response after it gets its own answer.
func TestNoEventsBeforeCreated(t *testing.T) {
	c := scriptFront(t, func(n int) []string {
		f := answerFrames(fmt.Sprintf("resp_%d", n), fmt.Sprintf("answer %d", n))
		if n == 2 {
			boom := frameOf("error", map[string]any{"status": 500, "error": map[string]any{"type": "server_error", "code": "boom", "message": "boom"}})
			return append([]string{f[0], boom}, f[1:]...)
		}
		return f
	})
	// The upstream numbers the creates it reads, across sockets: when the front closes the socket
	// of the third request before the upstream read that create, the fourth request is the
	// upstream's third. What must never happen is the failed second response's text reaching
	// another response.
	for i, want := range []string{"completed", "failed", "", "completed"} {
		n := i + 1
		c.Send(map[string]any{"type": "response.create", "model": "m", "input": fmt.Sprintf("request %d", n)})
		fs := c.Until("response.failed", "response.completed")
		last := fs[len(fs)-1]
		for _, f := range fs {
			if d := f.Str("delta"); n != 2 && d == "answer 2" {
				t.Fatalf("response %d streamed the failed response's %q", n, d)
			}
		}
		if got := answer(last); n != 2 && got == "answer 2" {
			t.Fatalf("response %d answered the failed response's %q", n, got)
		}
		if want != "" && last.Type() != "response."+want {
			t.Fatalf("response %d: want %s, got %v", n, want, last)
		}
	}
}
