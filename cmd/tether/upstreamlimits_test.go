package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// textEngine is a Chat Completions engine for the upstream limit tests. A request whose body
// holds "hold" gets 256 KiB of text, then nothing until release is closed, then its end; any
// other gets text deltas of size bytes without end, until its reader goes.
func textEngine(t *testing.T, size int, release chan struct{}) string {
	t.Helper()
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		chunk := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", strings.Repeat("z", size))
		if !strings.Contains(string(body), "hold") {
			for {
				if _, err := io.WriteString(w, chunk); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
		for range (256 << 10) / size {
			_, _ = io.WriteString(w, chunk)
		}
		_ = rc.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(es.Close)
	return es.URL + "/v1"
}

// TestLimitUpstreamMaxOutputTokens: an engine that streams without end to a request without
// max_output_tokens is cut at -upstream-max-output-tokens: the response ends incomplete.
func TestLimitUpstreamMaxOutputTokens(t *testing.T) {
	base := limitServer(t, "-backend", "chat", "-upstream", textEngine(t, 4, nil), "-upstream-max-output-tokens", "200")
	code, m := call(t, "POST", base+"/v1/responses", "", `{"model":"m","input":"hi","store":false}`)
	d, _ := m["incomplete_details"].(map[string]any)
	u, _ := m["usage"].(map[string]any)
	if code != 200 || m["status"] != "incomplete" || d["reason"] != "max_output_tokens" || u["output_tokens"] != float64(200) {
		t.Fatalf("%d %v %v %v; want incomplete max_output_tokens after 200 tokens", code, m["status"], m["incomplete_details"], m["usage"])
	}
}

// TestLimitUpstreamBytesCounted: the text an engine streams counts in -max-memory while the
// step runs (tether_memory_budget_bytes rises mid-step and falls back after it), and an
// endless stream that does not fit fails its step with a server_error naming the budget and
// what did not fit (the upstream's event being read, or the step's output accrued from it).
func TestLimitUpstreamBytesCounted(t *testing.T) {
	release := make(chan struct{})
	base := limitServer(t, "-backend", "chat", "-upstream", textEngine(t, 16<<10, release), "-max-frame", "256KiB", "-max-memory", "4MiB")
	budget := func() float64 { return metric(t, base, "", "tether_memory_budget_bytes") }
	idle := budget()
	done := make(chan map[string]any, 1)
	go func() {
		resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hold","store":false}`))
		if err != nil {
			done <- map[string]any{"error": err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- map[string]any{"body": string(b)}
	}()
	waitUntil(t, "the step's 256 KiB of text counted while it runs", func() bool { return budget()-idle >= 2*(256<<10) })
	close(release)
	if r := <-done; !strings.Contains(fmt.Sprint(r["body"]), `"status":"completed"`) {
		t.Fatalf("the held step: %v", r)
	}
	waitUntil(t, "the budget given back", func() bool { return budget() == idle })

	code, m := call(t, "POST", base+"/v1/responses", "", `{"model":"m","input":"endless","store":false}`)
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != 200 || m["status"] != "failed" || e["code"] != "server_error" || !strings.Contains(msg, "-max-memory") ||
		!strings.Contains(msg, "what the upstream engine streamed (one event") && !strings.Contains(msg, "the model's output (one step's text") {
		t.Fatalf("%d %v %v; want failed server_error naming -max-memory and what did not fit", code, m["status"], m["error"])
	}
	waitUntil(t, "the budget given back", func() bool { return budget() == idle })
}
