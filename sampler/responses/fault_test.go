package responses_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/responses"
)

// faultCap is where a fault upstream gives up on its own: a backend that never stops reading
// would take this much. Every bound under test stops far below it.
const faultCap = 512 << 20

// faultUpstream is a Responses WebSocket upstream that answers the first response.create with
// response.created, then head (an output_item.added), then body frames until the socket fails
// (or faultCap). It reports the bytes it wrote and whether a write failed on served.
type faultUpstream struct {
	head, body string
	every      time.Duration // pause between body frames (0: none)
	served     chan faultRun
}

// faultRun is what one socket of a fault upstream did.
type faultRun struct {
	bytes   int
	stopped bool // a write failed: the backend closed the socket
}

func (f *faultUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	ctx := context.Background()
	run := faultRun{}
	defer func() { f.served <- run }()
	if _, _, err := c.Read(ctx); err != nil {
		return
	}
	ctx = c.CloseRead(ctx) // the backend's close frame ends ctx
	frames := []string{`{"type":"response.created","response":{"id":"resp_fault","status":"in_progress"}}`, f.head}
	for i := 0; run.bytes < faultCap; i++ {
		data := f.body
		if i < len(frames) {
			data = frames[i]
		}
		if err := c.Write(ctx, websocket.MessageText, []byte(data)); err != nil {
			run.stopped = true
			return
		}
		run.bytes += len(data)
		if f.every > 0 {
			select {
			case <-time.After(f.every):
			case <-ctx.Done():
				run.stopped = true
				return
			}
		}
	}
}

// frameOf returns an event frame of type typ with the given fields.
func frameOf(typ string, fields map[string]any) string {
	m := map[string]any{"type": typ}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// faultResult is the part of a Response a fault test reads.
type faultResult struct {
	Status            string
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Error             *struct{ Code, Message string }
	Output            []struct {
		Content []struct{ Text string }
	}
	Usage struct {
		OutputTokens int `json:"output_tokens"`
	}
}

// TestFaultUpstreamBounded: each way a Responses upstream can stream without end is cut at its
// bound; the client gets its terminal Response (incomplete at max_output_tokens, else failed
// with a server_error naming the fault), and the upstream sees its socket closed far below
// faultCap.
func TestFaultUpstreamBounded(t *testing.T) {
	const small = 64 << 10
	message := frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})
	call := frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "function_call", "name": "f", "call_id": "call_1"}})
	word := frameOf("response.output_text.delta", map[string]any{"delta": "word "})
	huge := frameOf("response.output_text.delta", map[string]any{"delta": strings.Repeat("y", 4*small)})
	args := frameOf("response.function_call_arguments.delta", map[string]any{"delta": "xxxxxxxxxxxxxxxx"})
	opts := responses.Options{Timeout: 10 * time.Second, ReadLimit: 8 * small, MaxStepBytes: small, MaxArgumentBytes: small / 2}
	for _, tc := range []struct {
		name     string
		up       faultUpstream
		stepTime time.Duration
		tokens   int // Options.MaxOutputTokens
		req      string
		says     string // "": incomplete max_output_tokens with 100 tokens
	}{
		{name: "endless deltas at max_output_tokens", up: faultUpstream{head: message, body: word},
			req: `{"model":"m","input":"hi","store":false,"max_output_tokens":100}`},
		{name: "endless deltas without max_output_tokens, at the server's bound", up: faultUpstream{head: message, body: word}, tokens: 100},
		{name: "endless deltas, the request's max_output_tokens over the server's bound", up: faultUpstream{head: message, body: word}, tokens: 100,
			req: `{"model":"m","input":"hi","store":false,"max_output_tokens":100000}`},
		{name: "endless deltas", up: faultUpstream{head: message, body: word},
			says: "more than 64 KiB in one step's text and arguments"},
		{name: "huge deltas", up: faultUpstream{head: message, body: huge},
			says: "more than 64 KiB in one step's text and arguments"},
		{name: "endless arguments", up: faultUpstream{head: call, body: args},
			says: "more than 32 KiB in one tool call's arguments"},
		{name: "steady stream past the step timeout", up: faultUpstream{head: message, body: word, every: 5 * time.Millisecond},
			stepTime: 200 * time.Millisecond, says: "longer than 200ms (-upstream-step-timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.up.served = make(chan faultRun, 1)
			us := httptest.NewServer(&tc.up)
			t.Cleanup(us.Close)
			o := opts
			o.URL, o.StepTimeout, o.MaxOutputTokens = "ws"+strings.TrimPrefix(us.URL, "http")+"/v1/responses", tc.stepTime, tc.tokens
			m, err := responses.New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, front := startFront(t, server.Options{Model: m})
			req := tc.req
			if req == "" {
				req = `{"model":"m","input":"hi","store":false}`
			}
			resp, err := http.Post(front+"/v1/responses", "application/json", strings.NewReader(req))
			if err != nil {
				t.Fatal(err)
			}
			var r faultResult
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if tc.says == "" {
				text := ""
				for _, it := range r.Output {
					for _, c := range it.Content {
						text += c.Text
					}
				}
				if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" {
					t.Fatalf("status %s %+v %+v, want incomplete max_output_tokens", r.Status, r.IncompleteDetails, r.Error)
				}
				if n := strings.Count(text, "word "); n != 100 || r.Usage.OutputTokens != 100 {
					t.Fatalf("%d deltas passed on, output_tokens %d; want 100", n, r.Usage.OutputTokens)
				}
			} else if r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" || !strings.Contains(r.Error.Message, tc.says) {
				t.Fatalf("status %s, error %+v; want failed server_error saying %q", r.Status, r.Error, tc.says)
			}
			run := <-tc.up.served
			t.Logf("served %d bytes", run.bytes)
			// Socket buffers take a few MiB on loopback after the backend stopped, and the
			// backend holds at most about twice ReadLimit; one that kept on would take faultCap.
			if !run.stopped || run.bytes > 32<<20 {
				t.Fatalf("the upstream served %d bytes (stopped by the backend: %v)", run.bytes, run.stopped)
			}
		})
	}
}
