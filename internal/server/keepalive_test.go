package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// longInput is about 6,000 tokens: at the sim's 65 tokens/s preset (3,000 tokens/s prefill,
// 500 ms to the first token) the first output event comes about 2.5 s after in_progress.
var longInput = strings.Repeat("word ", 6000)

// keepAliveServer serves the realtime 65 tokens/s sim with a 200 ms keepalive.
func keepAliveServer(t *testing.T) string {
	_, url := testServer(t, Options{Model: slowModel(), Limits: session.Limits{KeepAlive: 200 * time.Millisecond}})
	return url
}

// keepalives counts the response.in_progress frames after the first one and before the first
// output event, and checks they carry an in_progress Response.
func keepalives(t *testing.T, fs []wstest.Frame) int {
	t.Helper()
	n, seen := 0, false
	for _, f := range fs {
		switch {
		case f.Type() == "response.in_progress" && !seen:
			seen = true
		case f.Type() == "response.in_progress":
			if f.Str("response", "status") != "in_progress" {
				t.Fatalf("keepalive with status %q", f.Str("response", "status"))
			}
			n++
		case strings.HasPrefix(f.Type(), "response.output_"):
			return n
		}
	}
	return n
}

func TestKeepAliveDuringLongPrefillAppendShape(t *testing.T) {
	c := dialAppend(t, keepAliveServer(t))
	c.Send(create(longInput, map[string]string{"sim.answer_tokens": "1"}))
	fs := c.Until("response.completed")
	checkGrammar(t, fs)
	if n := keepalives(t, fs); n < 2 {
		t.Fatalf("%d keepalives during a 2.5 s prefill with a 200 ms keepalive", n)
	}
}

func TestKeepAliveDuringLongPrefillPublicWebSocket(t *testing.T) {
	c := wstest.Dial(t, keepAliveServer(t), nil)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": longInput})
	fs := c.Until("response.completed")
	if n := keepalives(t, fs); n < 2 {
		t.Fatalf("%d keepalives during a 2.5 s prefill with a 200 ms keepalive", n)
	}
	wstest.CheckGrammar(t, conformance.ShapePublic, fs)
}

func TestKeepAliveDuringLongPrefillSSE(t *testing.T) {
	url := httpURL(keepAliveServer(t), "/v1/responses")
	body, _ := json.Marshal(map[string]any{"model": "sim", "input": longInput, "stream": true})
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var fs []wstest.Frame
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f wstest.Frame
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatalf("bad SSE data %q: %v", data, err)
		}
		fs = append(fs, f)
	}
	if len(fs) == 0 || fs[len(fs)-1].Type() != "response.completed" {
		t.Fatalf("SSE stream did not complete: %d events", len(fs))
	}
	if n := keepalives(t, fs); n < 2 {
		t.Fatalf("%d keepalives during a 2.5 s prefill with a 200 ms keepalive", n)
	}
	wstest.CheckGrammar(t, conformance.ShapePublic, fs)
}
