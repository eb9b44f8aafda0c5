package responses_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/responses"
	"github.com/tetherd/tether/session"
)

// waitBudget waits until ok holds of the budget's bytes in use (polling the budget itself),
// or fails the test after 20 s.
func waitBudget(t *testing.T, b *session.Budget, what string, ok func(int64) bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !ok(b.InUse()); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the budget holds %d bytes; waited for %s", b.InUse(), what)
		}
	}
}

// postAsync sends a create over HTTP and decodes its Response, for a goroutine.
func postAsync(base, body string) (faultResult, error) {
	var r faultResult
	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&r)
	return r, err
}

// backend returns the responses backend reading the upstream at us, with opts.
func backend(t *testing.T, us *httptest.Server, opts responses.Options) *responses.Model {
	t.Helper()
	opts.URL = "ws" + strings.TrimPrefix(us.URL, "http") + "/v1/responses"
	m, err := responses.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStepBytesInBudget: the text a Responses upstream streams is counted in the server's
// memory budget as it arrives, while the step still runs (the upstream holds the response
// open mid-step), and is given back once the step and its response have ended.
func TestStepBytesInBudget(t *testing.T) {
	const text = 256 << 10
	delta := frameOf("response.output_text.delta", map[string]any{"delta": strings.Repeat("z", 4<<10)})
	release := make(chan struct{})
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
		frames := []string{`{"type":"response.created","response":{"id":"resp_up","status":"in_progress"}}`,
			frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})}
		for range text / (4 << 10) {
			frames = append(frames, delta)
		}
		for _, f := range frames {
			if c.Write(ctx, websocket.MessageText, []byte(f)) != nil {
				return
			}
		}
		select { // mid-step: everything above is streamed, the step has not ended
		case <-release:
		case <-ctx.Done():
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.completed","response":{"id":"resp_up","status":"completed","usage":{"input_tokens":1,"output_tokens":64}}}`))
		_, _, _ = c.Read(ctx) // until the backend closes the socket
	}))
	t.Cleanup(us.Close)
	srv, front := startFront(t, server.Options{Model: backend(t, us, responses.Options{Timeout: 20 * time.Second})})
	b := srv.Budget()
	idle := b.InUse()
	type answer struct {
		r   faultResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := postAsync(front, `{"model":"m","input":"hi","store":false}`)
		done <- answer{r, err}
	}()
	waitBudget(t, b, "the step's text to be counted while the step runs", func(n int64) bool {
		return n-idle >= text*sampler.AccrueFactor
	})
	t.Logf("mid-step the budget holds %d bytes more than idle (%d bytes of text streamed)", b.InUse()-idle, text)
	close(release)
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.r.Status != "completed" || len(a.r.Output) != 1 || len(a.r.Output[0].Content) != 1 || len(a.r.Output[0].Content[0].Text) != text {
		t.Fatalf("status %s, error %+v, %d items", a.r.Status, a.r.Error, len(a.r.Output))
	}
	waitBudget(t, b, "the budget to be given back", func(n int64) bool { return n == idle })
}

// TestFrameOverBudget: a Responses upstream's frame that does not fit in the server's memory
// budget as it arrives fails the step with a server_error naming the upstream and the
// budget; the socket is closed, and everything the step held is given back.
func TestFrameOverBudget(t *testing.T) {
	huge := frameOf("response.output_text.delta", map[string]any{"delta": strings.Repeat("y", 1<<20)})
	message := frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})
	up := &faultUpstream{head: message, body: huge, served: make(chan faultRun, 1)}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	srv, front := startFront(t, server.Options{MaxMemory: 2 << 20, Model: backend(t, us, responses.Options{Timeout: 10 * time.Second})})
	b := srv.Budget()
	idle := b.InUse()
	r, err := postAsync(front, `{"model":"m","input":"hi","store":false}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" ||
		!strings.Contains(r.Error.Message, "memory budget (-max-memory)") || !strings.Contains(r.Error.Message, "upstream") {
		t.Fatalf("status %s, error %+v; want failed server_error naming the memory budget and the upstream", r.Status, r.Error)
	}
	t.Logf("error: %s", r.Error.Message)
	if run := <-up.served; !run.stopped {
		t.Fatalf("the upstream's socket was not closed (%d bytes served)", run.bytes)
	}
	waitBudget(t, b, "the budget to be given back", func(n int64) bool { return n == idle })
}
