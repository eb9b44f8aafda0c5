package chat_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/chat"
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

// postAsync sends a create over HTTP and decodes its Response, for a goroutine (no t.Fatal).
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

// TestStepBytesInBudget: the text an engine streams is counted in the server's memory budget
// as it arrives, while the step still runs (the engine holds its stream open mid-step), and
// is given back once the step and its response have ended.
func TestStepBytesInBudget(t *testing.T) {
	const text = 256 << 10
	delta := strings.Repeat("z", 4<<10)
	release := make(chan struct{})
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range text / len(delta) {
			_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", delta)
		}
		_ = http.NewResponseController(w).Flush()
		select { // mid-step: everything above is streamed, the step has not ended
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(es.Close)
	srv, front := servertest.Start(t, server.Options{Model: newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}, Timeout: 20 * time.Second})})
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

// TestStepOverBudget: an engine whose endless stream does not fit in the server's memory
// budget fails its step with a server_error naming the budget and what did not fit (the
// upstream's event being read, or the step's output accrued from it); the engine's stream is
// closed, and everything the step held is given back.
func TestStepOverBudget(t *testing.T) {
	big := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("w", 16<<10) + "\"}}]}\n\n"
	f := &faultEngine{body: big, served: make(chan faultRun, 1)}
	es := httptest.NewServer(f)
	t.Cleanup(es.Close)
	srv, front := servertest.Start(t, server.Options{MaxMemory: 2 << 20,
		Model: newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}, Timeout: 10 * time.Second})})
	b := srv.Budget()
	idle := b.InUse()
	r := create(t, front, `{"model":"m","input":"hi","store":false}`)
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" ||
		!strings.Contains(r.Error.Message, "memory budget (-max-memory)") ||
		!strings.Contains(r.Error.Message, "what the upstream engine streamed (one event") && !strings.Contains(r.Error.Message, "the model's output (one step's text") {
		t.Fatalf("status %s, error %+v; want failed server_error naming the memory budget and what did not fit", r.Status, r.Error)
	}
	t.Logf("error: %s", r.Error.Message)
	run := <-f.served
	if !run.stopped || run.bytes > 32<<20 {
		t.Fatalf("the engine served %d bytes (stopped by the reader: %v)", run.bytes, run.stopped)
	}
	waitBudget(t, b, "the budget to be given back", func(n int64) bool { return n == idle })
}
