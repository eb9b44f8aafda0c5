package chat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/llamatest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/chat"
)

// engineStep is what the engine itself reported for one chat completion, read off the wire
// by engineProxy.
type engineStep struct {
	slot     int       // id_slot of the request, -1 for none
	prompt   int       // timings.prompt_n + cache_n: the context the engine processed
	cacheN   int       // timings.cache_n: prompt tokens reused from the slot
	promptMS float64   // timings.prompt_ms: the engine's time prefilling the rest
	usage    chatUsage // the usage chunk, for engines without llama.cpp's timings (Ollama)
	status   int
	request  chatRequest
}

type chatRequest struct {
	IDSlot   *int              `json:"id_slot"`
	Messages []json.RawMessage `json:"messages"`
}

// engineProxy sits between Tether and a real llama-server: it forwards everything unchanged
// and records, for each streamed chat completion, the slot it named and the engine's own
// timings from the final chunk.
type engineProxy struct {
	next *httputil.ReverseProxy
	mu   sync.Mutex
	log  []engineStep
	more chan struct{} // closed when a step is recorded; nil when nobody waits
}

func newEngineProxy(t *testing.T, target string) (*engineProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &engineProxy{next: httputil.NewSingleHostReverseProxy(u)}
	p.next.FlushInterval = -1
	// The proxy must not add failures of its own: llama-server closes a kept-alive connection
	// after each streamed reply, so the proxy opens a new one per request.
	p.next.Transport = &http.Transport{DisableKeepAlives: true}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, hs.URL
}

func (p *engineProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		p.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	step := engineStep{slot: -1}
	_ = json.Unmarshal(body, &step.request)
	if step.request.IDSlot != nil {
		step.slot = *step.request.IDSlot
	}
	rec := &timingsWriter{ResponseWriter: w}
	rec.done = func() {
		step.prompt, step.cacheN, step.status, step.promptMS, step.usage = rec.promptN+rec.cacheN, rec.cacheN, rec.status, rec.promptMS, rec.usage
		p.record(step)
	}
	p.next.ServeHTTP(rec, r)
	rec.finish()
}

// record adds a step and wakes waitSteps.
func (p *engineProxy) record(step engineStep) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, step)
	if p.more != nil {
		close(p.more)
		p.more = nil
	}
}

// waitSteps waits until the proxy has recorded n steps (a step is recorded when the engine's
// answer has been forwarded whole, which can be just after Tether's client saw the end).
func (p *engineProxy) waitSteps(t *testing.T, n int) []engineStep {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		if len(p.log) >= n {
			steps := append([]engineStep(nil), p.log...)
			p.mu.Unlock()
			return steps
		}
		if p.more == nil {
			p.more = make(chan struct{})
		}
		more := p.more
		p.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("the engine proxy recorded fewer than %d steps", n)
		}
	}
}

// timingsWriter reads llama.cpp's timings from a streamed answer as it is forwarded, and calls
// done once: when the event carrying the timings has been forwarded, or at the end.
type timingsWriter struct {
	http.ResponseWriter
	buf             bytes.Buffer
	status          int
	promptN, cacheN int
	promptMS        float64
	usage           chatUsage
	done            func()
	called          bool
}

func (w *timingsWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *timingsWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.buf.Write(b)
	w.scan()
	return n, err
}

func (w *timingsWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// scan reads the complete lines buffered so far: usage and timings are recorded, and the data
// line with timings (llama.cpp's last chunk) or [DONE] ends the step.
func (w *timingsWriter) scan() {
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.Reset()
			w.buf.WriteString(line) // an incomplete line: wait for the rest
			return
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var c struct {
			Usage   *chatUsage `json:"usage"`
			Timings *struct {
				PromptN  int     `json:"prompt_n"`
				CacheN   int     `json:"cache_n"`
				PromptMS float64 `json:"prompt_ms"`
			} `json:"timings"`
		}
		if data != "[DONE]" && json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Usage != nil {
			w.usage = *c.Usage
		}
		if c.Timings != nil {
			w.promptN, w.cacheN, w.promptMS = c.Timings.PromptN, c.Timings.CacheN, c.Timings.PromptMS
		}
		if c.Timings != nil || data == "[DONE]" {
			w.Flush()
			w.finish()
		}
	}
}

// chatUsage is a Chat Completions usage object as the engine sent it.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// finish calls done once.
func (w *timingsWriter) finish() {
	if !w.called {
		w.called = true
		w.done()
	}
}

// engineFront starts Tether with the chat backend in front of engines (each behind an
// engineProxy) and returns its base URL, the model and the proxies.
func engineFront(t *testing.T, opts chat.Options, engines ...*llamatest.Server) (string, *chat.Model, []*engineProxy) {
	t.Helper()
	var proxies []*engineProxy
	for _, e := range engines {
		p, u := newEngineProxy(t, e.URL())
		proxies = append(proxies, p)
		opts.BaseURLs = append(opts.BaseURLs, u+"/v1")
	}
	m := newModel(t, opts)
	if err := m.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, front := servertest.Start(t, server.Options{Model: m})
	return front, m, proxies
}
