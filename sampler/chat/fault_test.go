package chat_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
)

// faultCap is where a fault engine gives up on its own: a reader that never stops would read
// this much. Every bound under test stops far below it.
const faultCap = 256 << 20

// faultEngine is a Chat Completions engine that answers every request with a misbehaving
// stream: head once, then body repeated until the client stops reading (or faultCap). It
// reports the bytes it served and whether a write failed (the reader went away) on served.
type faultEngine struct {
	head, body string
	every      time.Duration // pause between bodies (0: none)
	served     chan faultRun
}

// faultRun is what one request of a fault engine did.
type faultRun struct {
	bytes   int
	stopped bool // a write failed: the client closed the stream
}

func (f *faultEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	run := faultRun{}
	defer func() { f.served <- run }()
	chunk := []byte(f.body)
	for b := []byte(f.head); run.bytes < faultCap; b = chunk {
		n, err := w.Write(b)
		run.bytes += n
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			run.stopped = true
			return
		}
		if f.every > 0 {
			select {
			case <-time.After(f.every):
			case <-r.Context().Done():
				run.stopped = true
				return
			}
		}
	}
}

// faultFront starts fault engine f and a front Tether whose chat backend reads it with opts.
func faultFront(t *testing.T, f *faultEngine, opts chat.Options) string {
	t.Helper()
	f.served = make(chan faultRun, 1)
	es := httptest.NewServer(f)
	t.Cleanup(es.Close)
	opts.BaseURLs = []string{es.URL + "/v1"}
	_, front := servertest.Start(t, server.Options{Model: newModel(t, opts)})
	return front
}

// faultResult is the part of a Response a fault test reads.
type faultResult struct {
	Status            string
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Error             *struct{ Code, Message string }
	Output            []struct {
		Type      string
		Arguments string
		Content   []struct{ Text string }
	}
	Usage struct {
		OutputTokens int `json:"output_tokens"`
	}
}

// create posts a create request over HTTP (not stored) and decodes its Response.
func create(t *testing.T, base, body string) faultResult {
	t.Helper()
	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r faultResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	textChunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word \"}}]}\n\n"
	callHead  = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"location\\\":\\\"\"}}]}}]}\n\n"
	argsChunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"xxxxxxxxxxxxxxxx\"}}]}}]}\n\n"
)

// TestFaultEngineBounded: each way an engine can stream without end is cut at its bound; the
// client gets its terminal Response (incomplete at max_output_tokens, else failed with a
// server_error naming the engine's fault), and the engine sees its reader stop far below
// faultCap.
func TestFaultEngineBounded(t *testing.T) {
	const small = 64 << 10
	opts := chat.Options{Timeout: 10 * time.Second, MaxEventBytes: small, MaxStepBytes: 4 * small, MaxArgumentBytes: 2 * small}
	bigChunk := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("y", 2*small) + "\"}}]}\n\n"
	for _, tc := range []struct {
		name       string
		engine     faultEngine
		opts       chat.Options
		req        string
		status     string
		says       string
		maxServed  int
		wantTokens int
	}{
		{name: "endless text at max_output_tokens", engine: faultEngine{body: textChunk},
			req: `{"model":"m","input":"hi","store":false,"max_output_tokens":100}`, status: "incomplete", wantTokens: 100},
		{name: "endless text without max_output_tokens, at the server's bound", engine: faultEngine{body: textChunk},
			opts: chat.Options{MaxOutputTokens: 300}, status: "incomplete", wantTokens: 300},
		{name: "endless text, the request's max_output_tokens over the server's bound", engine: faultEngine{body: textChunk},
			opts: chat.Options{MaxOutputTokens: 300}, req: `{"model":"m","input":"hi","store":false,"max_output_tokens":100000}`,
			status: "incomplete", wantTokens: 300},
		{name: "endless text", engine: faultEngine{body: textChunk},
			says: "more than 256 KiB in one step's text and arguments"},
		{name: "endless arguments", engine: faultEngine{head: callHead, body: argsChunk},
			says: "more than 128 KiB in one tool call's arguments"},
		{name: "unterminated line", engine: faultEngine{head: "data: {\"choices\":[{\"delta\":{\"content\":\"", body: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
			says: "SSE line or event of more than 64 KiB"},
		{name: "data lines that never end an event", engine: faultEngine{body: "data: x\n"},
			says: "SSE line or event of more than 64 KiB"},
		{name: "one valid oversized chunk", engine: faultEngine{head: bigChunk, body: textChunk},
			says: "SSE line or event of more than 64 KiB"},
		{name: "steady stream past the step timeout", engine: faultEngine{body: textChunk, every: 5 * time.Millisecond},
			opts: chat.Options{StepTimeout: 200 * time.Millisecond}, says: "longer than 200ms (-upstream-step-timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			if tc.opts.StepTimeout != 0 {
				o.StepTimeout = tc.opts.StepTimeout
			}
			o.MaxOutputTokens = tc.opts.MaxOutputTokens
			front := faultFront(t, &tc.engine, o)
			req := tc.req
			if req == "" {
				req = `{"model":"m","input":"hi","store":false}`
			}
			r := create(t, front, req)
			if tc.status == "incomplete" {
				text := ""
				for _, it := range r.Output {
					for _, c := range it.Content {
						text += c.Text
					}
				}
				if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" {
					t.Fatalf("status %s %+v %+v, want incomplete max_output_tokens", r.Status, r.IncompleteDetails, r.Error)
				}
				if n := strings.Count(text, "word "); n != tc.wantTokens || r.Usage.OutputTokens != tc.wantTokens {
					t.Fatalf("%d deltas passed on, output_tokens %d; want %d", n, r.Usage.OutputTokens, tc.wantTokens)
				}
			} else if r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" || !strings.Contains(r.Error.Message, tc.says) {
				t.Fatalf("status %s, error %+v; want failed server_error saying %q", r.Status, r.Error, tc.says)
			}
			run := <-tc.engine.served
			t.Logf("served %d bytes", run.bytes)
			// The engine writes into socket buffers (a few MiB on loopback) after the reader
			// stopped; a reader that kept on would have taken faultCap.
			if !run.stopped || run.bytes > 32<<20 {
				t.Fatalf("the engine served %d bytes (stopped by the reader: %v)", run.bytes, run.stopped)
			}
		})
	}
}

// TestFaultEngineAbsurdUsage: an engine that reports impossible usage (a negative count,
// counts near the int64 limit) does not reach the client as such nor wrap Tether's counters:
// each figure of a step is taken between 0 and 2^31-1, and the per-replica token counters
// stay non-negative over several steps.
func TestFaultEngineAbsurdUsage(t *testing.T) {
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9000000000000000000,\"completion_tokens\":-5,"+
			"\"prompt_tokens_details\":{\"cached_tokens\":9000000000000000001}}}\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(es.Close)
	m := newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}})
	_, front := servertest.Start(t, server.Options{Model: m})
	const most = 1<<31 - 1
	for range 3 {
		resp, err := http.Post(front+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi","store":false}`))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Status string
			Usage  struct {
				InputTokens        int `json:"input_tokens"`
				OutputTokens       int `json:"output_tokens"`
				TotalTokens        int `json:"total_tokens"`
				InputTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if r.Status != "completed" || u.InputTokens < 0 || u.InputTokens > most || u.OutputTokens < 0 || u.OutputTokens > most ||
			u.InputTokensDetails.CachedTokens < 0 || u.InputTokensDetails.CachedTokens > u.InputTokens {
			t.Fatalf("%s, usage %+v", r.Status, u)
		}
	}
	for _, name := range []string{"tether_upstream_input_tokens_total", "tether_upstream_cached_tokens_total"} {
		if v := modelCounter(t, m, name); v < 0 || v > 3*most {
			t.Fatalf("%s = %v after 3 steps", name, v)
		}
	}
}

// TestFaultEngine500KeepsReplica: an engine's HTTP 500 is its failure on that one request (a
// llama-server answers 500 to a conversation whose tool call arguments are not JSON, which a
// client may send): the step fails, but the replica stays in placement, where a refused
// connection or a 502/503/504 would take it out.
func TestFaultEngine500KeepsReplica(t *testing.T) {
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON","type":"server_error"}}`)
	}))
	t.Cleanup(es.Close)
	m := newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}})
	_, front := servertest.Start(t, server.Options{Model: m})
	if r := create(t, front, `{"model":"m","input":"hi","store":false}`); r.Status != "failed" || r.Error == nil || r.Error.Code != "server_error" {
		t.Fatalf("%s %+v", r.Status, r.Error)
	}
	if up := modelGauge(t, m, "tether_upstream_up"); up != 1 {
		t.Fatalf("tether_upstream_up = %v after an HTTP 500", up)
	}
}

// modelGauge reads the model's gauge name, summed over its replicas.
func modelGauge(t *testing.T, m *chat.Model, name string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mm := range mf.GetMetric() {
				sum += mm.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// TestFaultEngineFewerSlots: a replica that was not checked at start (it was down) and then
// comes up with fewer slots than Options.Slots takes no step: llama-server would take an
// id_slot past its last slot modulo its slot count, so two rollouts would share a slot. Its
// steps go to the other replica, and it is out of placement; with only that replica, the step
// fails naming the cause.
func TestFaultEngineFewerSlots(t *testing.T) {
	engine := func(slots int, steps *atomic.Int64) *httptest.Server {
		es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/props" {
				_, _ = fmt.Fprintf(w, `{"total_slots":%d}`, slots)
				return
			}
			steps.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"+
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n"+
				"data: [DONE]\n\n")
		}))
		t.Cleanup(es.Close)
		return es
	}
	var small, full atomic.Int64
	few, four := engine(2, &small), engine(4, &full)

	// Not probed: both replicas were down when the model started.
	m := newModel(t, chat.Options{BaseURLs: []string{few.URL + "/v1", four.URL + "/v1"}, Slots: 4})
	_, front := servertest.Start(t, server.Options{Model: m})
	for range 4 {
		if r := create(t, front, `{"model":"m","input":"hi","store":false}`); r.Status != "completed" {
			t.Fatalf("%s %+v", r.Status, r.Error)
		}
	}
	if small.Load() != 0 || full.Load() != 4 {
		t.Fatalf("steps: %d on the replica with 2 slots, %d on the one with 4", small.Load(), full.Load())
	}

	m = newModel(t, chat.Options{BaseURLs: []string{few.URL + "/v1"}, Slots: 4})
	_, front = servertest.Start(t, server.Options{Model: m})
	r := create(t, front, `{"model":"m","input":"hi","store":false}`)
	if r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, "fewer slots than -upstream-slots") || small.Load() != 0 {
		t.Fatalf("%s %+v, %d steps", r.Status, r.Error, small.Load())
	}
}

// TestFaultEngineMalformedChunkNamed: a chunk the engine sends malformed fails the step with a
// message in the wire's terms (the member and what it holds, or where the JSON breaks), never
// Go's type or struct field names.
func TestFaultEngineMalformedChunkNamed(t *testing.T) {
	for _, tc := range []struct{ chunk, says string }{
		{`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1e30}}}`,
			"usage.prompt_tokens_details.cached_tokens holds number 1e30, not an integer"},
		{`{"choices":[{"index":0,"delta":{"content":5}}]}`, "choices.delta.content holds number, not a string"},
		{`{"choices":[{"index":0,"delta":{"content":"x"}}`, "not valid JSON"},
		{`[1,2]`, "it is array, not an object"},
	} {
		es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+tc.chunk+"\n\ndata: [DONE]\n\n")
		}))
		m := newModel(t, chat.Options{BaseURLs: []string{es.URL + "/v1"}})
		_, front := servertest.Start(t, server.Options{Model: m})
		r := create(t, front, `{"model":"m","input":"hi","store":false}`)
		if r.Status != "failed" || r.Error == nil || !strings.Contains(r.Error.Message, tc.says) ||
			strings.Contains(r.Error.Message, "Go ") || strings.Contains(r.Error.Message, "struct") {
			t.Errorf("%s: %s %+v; want failed naming %q", tc.chunk, r.Status, r.Error, tc.says)
		}
		es.Close()
	}
}
