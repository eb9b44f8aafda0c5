package server

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/tetherd/tether/protocol"
)

// lockedBuffer is a log sink shared by the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hasControl reports a control character (Unicode Cc) in s.
func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	}) >= 0
}

// TestModelWithControlCharacterRefused: a model name holding a control character (NUL, a line
// feed, ESC, DEL, a C1 control) or an invisible one (a zero-width space, a byte order mark, a
// line separator) names no model: it is refused as an unknown model is (404
// model_not_found, param model) on every surface that takes one, the message shows the name
// escaped, and nothing of it reaches the log raw.
func TestModelWithControlCharacterRefused(t *testing.T) {
	logs := &lockedBuffer{}
	_, url := testServer(t, Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	check := func(what string, status int, body map[string]any) {
		t.Helper()
		e, _ := body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != 404 || e["code"] != "model_not_found" || e["param"] != "model" || msg == "" {
			t.Errorf("%s: %d %v, want 404 model_not_found param model", what, status, body)
		}
		if hasControl(msg) {
			t.Errorf("%s: the message holds the name raw: %q", what, msg)
		}
	}
	pub := dialPublic(t, url, "")
	app := dialAppend(t, url)
	for _, name := range []string{`sim\u0000`, `a\u0000b`, `sim\n`, `\u001b[2Jsim`, `sim\u007f`, `sim\u0085`, `si\u200bm`, `\ufeffsim`, `sim\u2028`, `sim\u2029`} {
		status, body := do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"`+name+`","input":"hi"}`)
		check("POST /v1/responses "+name, status, body)
		status, body = do(t, "POST", httpURL(url, "/v1/chat/completions"), "", `{"model":"`+name+`","messages":[{"role":"user","content":"hi"}]}`)
		check("POST /v1/chat/completions "+name, status, body)
		pub.SendRaw(`{"type":"response.create","model":"` + name + `","input":"hi"}`)
		app.SendRaw(`{"type":"response.create","model":"` + name + `","input":"hi"}`)
		e := pub.ExpectError(404, "model_not_found", "model")
		if m := e.Str("error", "message"); hasControl(m) {
			t.Errorf("public shape %s: the message holds the name raw: %q", name, m)
		}
		e = app.ExpectError(404, "model_not_found", "model")
		if m := e.Str("error", "message"); hasControl(m) {
			t.Errorf("append shape %s: the message holds the name raw: %q", name, m)
		}
	}
	status, body := do(t, "GET", httpURL(url, "/v1/models/a%00b"), "", "")
	check("GET /v1/models/a%00b", status, body)
	// A name longer than any model id is refused the same way on every surface; one at the
	// bound still reaches the backend.
	long := strings.Repeat("m", protocol.MaxModelNameLength+1)
	status, body = do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"`+long+`","input":"hi"}`)
	check("POST /v1/responses with a long model", status, body)
	status, body = do(t, "POST", httpURL(url, "/v1/chat/completions"), "", `{"model":"`+long+`","messages":[{"role":"user","content":"hi"}]}`)
	check("POST /v1/chat/completions with a long model", status, body)
	status, body = do(t, "GET", httpURL(url, "/v1/models/"+long), "", "")
	check("GET /v1/models/{long}", status, body)
	pub.SendRaw(`{"type":"response.create","model":"` + long + `","input":"hi"}`)
	pub.ExpectError(404, "model_not_found", "model")
	app.SendRaw(`{"type":"response.create","model":"` + long + `","input":"hi"}`)
	app.ExpectError(404, "model_not_found", "model")
	if status, body = do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"`+long[1:]+`","input":"hi"}`); status != 200 || body["model"] != long[1:] {
		t.Errorf("model of %d bytes: %d %v, want 200", len(long)-1, status, body["error"])
	}
	// A name without control characters still reaches the backend (the sim answers any name).
	status, body = do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim é","input":"hi"}`)
	if status != 200 || body["model"] != "sim é" {
		t.Errorf("model %q: %d %v, want 200", "sim é", status, body)
	}
	// The other free-text members are data: a control character in them is accepted, goes to the
	// backend as JSON (instructions) or nowhere, and comes back JSON-escaped in the Response; no
	// header, log line or store key is made of them.
	const ctl = `a\u0000b\u001b[2J\nc\u007f`
	status, body = do(t, "POST", httpURL(url, "/v1/responses"), "", `{"model":"sim","input":"hi","instructions":"`+ctl+
		`","user":"`+ctl+`","safety_identifier":"s\u0000","prompt_cache_key":"k\u0000","metadata":{"k\u0000":"`+ctl+`"}}`)
	want := "a\x00b\x1b[2J\nc\x7f"
	if md, _ := body["metadata"].(map[string]any); status != 200 || body["instructions"] != want || body["user"] != want ||
		body["safety_identifier"] != "s\x00" || body["prompt_cache_key"] != "k\x00" || md["k\x00"] != want {
		t.Errorf("control characters in free-text members: %d %v, want 200 with each echoed", status, body)
	}
	if l := logs.String(); strings.ContainsAny(l, "\x00\x1b\x7f") || strings.Contains(l, "\u0085") {
		t.Errorf("the log holds a control character raw: %q", l)
	}
}
