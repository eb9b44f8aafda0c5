package responses_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

// wsProxy relays WebSockets to a real upstream and closes the client side with code instead of
// forwarding the closeAt-th response.create it sees (counted over all connections).
type wsProxy struct {
	target  string
	closeAt int64
	code    websocket.StatusCode
	creates atomic.Int64
	wg      sync.WaitGroup
}

func startWSProxy(t *testing.T, target string, closeAt int64, code websocket.StatusCode) string {
	t.Helper()
	p := &wsProxy{target: target, closeAt: closeAt, code: code}
	hs := httptest.NewServer(p)
	t.Cleanup(func() { hs.Close(); p.wg.Wait() })
	return hs.URL
}

func (p *wsProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.wg.Add(1)
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, _, err := websocket.Dial(ctx, p.target, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	up.SetReadLimit(-1)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	go func() { // upstream → client
		defer cancel()
		for {
			typ, data, err := up.Read(ctx)
			if err != nil || c.Write(ctx, typ, data) != nil {
				return
			}
		}
	}()
	for { // client → upstream
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if strings.Contains(string(data), `"type":"response.create"`) && p.creates.Add(1) == p.closeAt {
			_ = c.Close(p.code, "injected by the test proxy")
			return
		}
		if up.Write(ctx, typ, data) != nil {
			return
		}
	}
}

// TestGoingAwayBeforeOutput: a close 1001 in answer to a step's create (before any output)
// makes the step run again on a new socket with the full context; the client sees nothing.
func TestGoingAwayBeforeOutput(t *testing.T) {
	up := upstream(t, server.Options{})
	px := startWSProxy(t, wsURL(up), 2, websocket.StatusGoingAway)
	fr := front(t, px+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("go away", 1, nil))
	fs := c.Until("response.done")
	n := 0
	c.Send(map[string]any{"type": "response.append", "response_id": fs[len(fs)-1].Str("response_id"), "input": outputs(fs[len(fs)-1], &n)})
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" || !strings.Contains(answer(last), `tool: "out-1"`) {
		t.Fatalf("rollout across the 1001: %v", last)
	}
	if fresh := metric(t, up, newMetric); fresh != 2 {
		t.Fatalf("upstream new chains %v, want 2", fresh)
	}
}

// TestOtherCloseFails: any other close code fails the step with a message naming it; the
// connection's next rollout dials again.
func TestOtherCloseFails(t *testing.T) {
	up := upstream(t, server.Options{})
	px := startWSProxy(t, wsURL(up), 1, websocket.StatusInternalError)
	fr := front(t, px+"/v1", 10*time.Second)
	c := wstest.Dial(t, wsURL(fr), appendHeader)
	c.Send(create("fail", 0, nil))
	fs := c.Until("response.completed", "response.failed")
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || !strings.Contains(last.Str("response", "error", "message"), "close 1011") {
		t.Fatalf("want response.failed naming close 1011, got %v", last)
	}
	c.Send(create("again", 0, nil))
	fs = c.Until("response.completed", "response.failed")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" {
		t.Fatalf("next rollout: %v", last)
	}
}
