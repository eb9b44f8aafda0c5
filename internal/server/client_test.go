package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// frame is one decoded server frame.
type frame map[string]any

func (f frame) typ() string { s, _ := f["type"].(string); return s }

func (f frame) str(path ...string) string {
	v := f.get(path...)
	s, _ := v.(string)
	return s
}

func (f frame) num(path ...string) int {
	v, _ := f.get(path...).(float64)
	return int(v)
}

func (f frame) get(path ...string) any {
	var v any = map[string]any(f)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// testServer starts Tether on an httptest server with opts; logs go to t.Logf.
func testServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		hs.Close()
	})
	return s, "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/responses"
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client is a raw JSON test peer for the append shape.
type client struct {
	t    *testing.T
	c    *websocket.Conn
	resp *http.Response
}

func dialAppend(t *testing.T, url string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	h.Add("OpenAI-Beta", "responses_websockets=2026-02-06, "+AppendBeta)
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return &client{t: t, c: c, resp: resp}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// next reads one frame within 10 seconds.
func (c *client) next() frame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.c.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("server sent a binary frame")
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("server frame is not a JSON object: %q", data)
	}
	return f
}

// until reads frames up to and including the first of one of the types.
func (c *client) until(types ...string) []frame {
	c.t.Helper()
	var fs []frame
	for {
		f := c.next()
		fs = append(fs, f)
		for _, typ := range types {
			if f.typ() == typ {
				return fs
			}
		}
		if f.typ() == "error" {
			c.t.Fatalf("unexpected error frame while waiting for %v: %v", types, f)
		}
	}
}

// expectError reads one frame and checks it is the error envelope with status, code, param.
func (c *client) expectError(status int, code, param string) frame {
	c.t.Helper()
	f := c.next()
	if f.typ() != "error" {
		c.t.Fatalf("want error %s, got %v", code, f)
	}
	if _, has := f["sequence_number"]; has {
		c.t.Errorf("error frame carries a sequence_number: %v", f)
	}
	if f.num("status") != status || f.str("error", "code") != code || f.str("error", "param") != param {
		c.t.Fatalf("want error status=%d code=%s param=%q, got %v", status, code, param, f)
	}
	if f.str("error", "type") == "" || f.str("error", "message") == "" {
		c.t.Fatalf("error without type or message: %v", f)
	}
	if param == "" && f.get("error", "param") != nil {
		c.t.Fatalf("param should be null: %v", f)
	}
	return f
}

// expectClose reads until the connection closes and checks the close code.
func (c *client) expectClose(code websocket.StatusCode) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.c.Read(ctx)
		if err == nil {
			continue
		}
		if got := websocket.CloseStatus(err); got != code {
			c.t.Fatalf("want close %d, got %v", code, err)
		}
		return
	}
}

var _ = io.EOF
