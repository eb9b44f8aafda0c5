// Package wstest is a raw-JSON WebSocket test peer shared by Tether's tests.
package wstest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wsguard"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/conformance"
)

// Frame is one decoded server frame: the conformance suite's [conformance.Frame], so frames
// read here can be fed to its grammar checker and read with its accessors (Num is -1 when the
// member is absent; Int reports presence).
type Frame = conformance.Frame

// Client is a raw JSON test peer.
type Client struct {
	T    testing.TB
	C    *websocket.Conn
	Resp *http.Response
}

// Dial opens a WebSocket to url with header h; the connection is closed at test cleanup.
func Dial(t testing.TB, url string, h http.Header) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(nil)})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return &Client{T: t, C: c, Resp: resp}
}

// SendRaw sends one text frame.
func (c *Client) SendRaw(s string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.C.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.T.Fatalf("write: %v", err)
	}
}

// Send sends v as JSON.
func (c *Client) Send(v any) {
	c.T.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.T.Fatal(err)
	}
	c.SendRaw(string(b))
}

// Next reads one Frame within 10 seconds.
func (c *Client) Next() Frame {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.C.Read(ctx)
	if err != nil {
		c.T.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		c.T.Fatalf("server sent a binary Frame")
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		c.T.Fatalf("server Frame is not a JSON object: %q", data)
	}
	return f
}

// Until reads frames up to and including the first of one of the types.
func (c *Client) Until(types ...string) []Frame {
	c.T.Helper()
	var fs []Frame
	for {
		f := c.Next()
		fs = append(fs, f)
		for _, typ := range types {
			if f.Type() == typ {
				return fs
			}
		}
		if f.Type() == "error" {
			c.T.Fatalf("unexpected error Frame while waiting for %v: %v", types, f)
		}
	}
}

// ExpectError reads one Frame and checks it is the error envelope with status, code, param.
func (c *Client) ExpectError(status int, code, param string) Frame {
	c.T.Helper()
	f := c.Next()
	if f.Type() != "error" {
		c.T.Fatalf("want error %s, got %v", code, f)
	}
	if _, has := f["sequence_number"]; has {
		c.T.Errorf("error Frame carries a sequence_number: %v", f)
	}
	if f.Num("status") != status || f.Str("error", "code") != code || f.Str("error", "param") != param {
		c.T.Fatalf("want error status=%d code=%s param=%q, got %v", status, code, param, f)
	}
	if f.Str("error", "type") == "" || f.Str("error", "message") == "" {
		c.T.Fatalf("error without type or message: %v", f)
	}
	if param == "" && f.Get("error", "param") != nil {
		c.T.Fatalf("param should be null: %v", f)
	}
	return f
}

// ExpectClose reads until the connection closes and checks the close code.
func (c *Client) ExpectClose(code websocket.StatusCode) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.C.Read(ctx)
		if err == nil {
			continue
		}
		if got := websocket.CloseStatus(err); got != code {
			c.T.Fatalf("want close %d, got %v", code, err)
		}
		return
	}
}

// ExpectErrorSkipping reads past other frames to the next error frame and checks it.
func (c *Client) ExpectErrorSkipping(status int, code, param string) Frame {
	c.T.Helper()
	for {
		f := c.Next()
		if f.Type() != "error" {
			continue
		}
		if f.Num("status") != status || f.Str("error", "code") != code || f.Str("error", "param") != param {
			c.T.Fatalf("want %d %s %s, got %v", status, code, param, f)
		}
		return f
	}
}

// CheckGrammar fails t unless frames, server events of one connection in shape
// (conformance.ShapePublic, also for an SSE stream, or conformance.ShapeAppend) read in
// order, pass the conformance suite's grammar checker ([conformance.Grammar]) and end
// cleanly. In the append shape a response.done followed by more frames is taken as answered
// by an accepted response.append to its rollout, as a test driving the rollout on does.
func CheckGrammar(t testing.TB, shape string, frames []Frame) {
	t.Helper()
	g := conformance.NewGrammar(shape)
	for i, f := range frames {
		if err := g.Feed(f); err != nil {
			t.Fatalf("grammar: frame %d of %d: %v\n%v", i, len(frames), err, f)
		}
		if f.Type() == "response.done" && i+1 < len(frames) {
			g.Appended(f.Str("response_id"))
		}
	}
	if err := g.Done(); err != nil {
		t.Fatalf("grammar: after %d frames: %v", len(frames), err)
	}
}
