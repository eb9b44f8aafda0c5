package compat_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/internal/wstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "compat")) }

type fixture struct {
	srv   *server.Server
	base  string // http://host/v1
	wsURL string // ws://host/v1/responses
}

func newFixture(t *testing.T, opts server.Options) *fixture {
	t.Helper()
	s, url := servertest.Start(t, opts)
	return &fixture{srv: s, base: url + "/v1", wsURL: "ws" + strings.TrimPrefix(url, "http") + "/v1/responses"}
}

func (f *fixture) dial(t *testing.T) *wstest.Client {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer sk-test")
	return wstest.Dial(t, f.wsURL, h)
}

var (
	shell   = map[string]any{"type": "function", "name": "exec_command", "description": "Run a command.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}, "strict": false}
	weather = map[string]any{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []string{"location"}, "additionalProperties": false}, "strict": true}
)

// create returns a response.create frame.
func create(input any, extra map[string]any) map[string]any {
	m := map[string]any{"type": "response.create", "model": "sim", "input": input}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

func toolOutput(callID, out string) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": callID, "output": out}
}

// turn sends a create and returns its events up to the terminal one, checked by the
// conformance suite's public-shape grammar.
func turn(t *testing.T, c *wstest.Client, msg map[string]any) []wstest.Frame {
	t.Helper()
	c.Send(msg)
	fs := c.Until("response.completed", "response.incomplete", "response.failed")
	wstest.CheckGrammar(t, conformance.ShapePublic, fs)
	return fs
}

func final(fs []wstest.Frame) wstest.Frame { return fs[len(fs)-1] }

func respID(fs []wstest.Frame) string { return fs[0].Str("response", "id") }

func callIDs(fs []wstest.Frame) []string {
	var ids []string
	out, _ := final(fs).Get("response", "output").([]any)
	for _, it := range out {
		m := wstest.Frame(it.(map[string]any))
		if m.Str("type") == "function_call" {
			ids = append(ids, m.Str("call_id"))
		}
	}
	return ids
}

func answer(fs []wstest.Frame) string {
	out, _ := final(fs).Get("response", "output").([]any)
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

// usage is the terminal Response's usage member at key, 0 if absent.
func usage(fs []wstest.Frame, key ...string) int {
	n, _ := final(fs).Int(append([]string{"response", "usage"}, key...)...)
	return n
}

// fingerprint is the sim's context fingerprint at the end of an answer.
func fingerprint(t *testing.T, fs []wstest.Frame) string {
	t.Helper()
	a := answer(fs)
	i := strings.LastIndex(a, "[ctx ")
	if i < 0 {
		t.Fatalf("answer without a context fingerprint: %q", a)
	}
	return a[i:]
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
