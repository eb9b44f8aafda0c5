package session_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/wstransport"
)

// wsServer accepts WebSockets over a real socket and hands each one's Conn (sharing budget
// and metrics) to the test; the Conns are closed when the test ends.
func wsServer(t *testing.T, opts session.Options) (url string, conns <-chan *session.Conn) {
	t.Helper()
	ch := make(chan *session.Conn, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := session.NewConn(wstransport.NewBudget(ws, 0, opts.Budget), opts)
		ch <- c
		<-c.Done()
	}))
	t.Cleanup(func() {
		srv.Close()
		close(ch)
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http"), ch
}

// dial opens a client WebSocket; stalled clients get a 4 KiB socket receive buffer and never
// read, so a large frame cannot be written to them.
func dial(t *testing.T, url string, conns <-chan *session.Conn, stalled bool) (*websocket.Conn, *session.Conn) {
	t.Helper()
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil && stalled {
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		}
		return c, err
	}}}
	ws, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	c := <-conns
	t.Cleanup(func() {
		_ = ws.CloseNow()
		c.Close()
		hc.CloseIdleConnections()
	})
	return ws, c
}

// waitFor polls cond (a state of the server) until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// served checks that a reading client gets n frames the server writes.
func served(t *testing.T, ws *websocket.Conn, c *session.Conn, n int) {
	t.Helper()
	frame := bytes.Repeat([]byte("y"), 1024)
	for i := range n {
		if err := c.Write(frame); err != nil {
			t.Fatalf("write %d to a reading client: %v", i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, b, err := ws.Read(ctx)
		cancel()
		if err != nil || len(b) != len(frame) {
			t.Fatalf("read %d: %d bytes, %v", i, len(b), err)
		}
	}
}

// TestQueuedFramesCounted: a frame queued to a client that does not read is counted in the
// Budget while it waits; when the write timeout drops the client the count falls back to
// 0, and a reading client sharing the Budget is served meanwhile.
func TestQueuedFramesCounted(t *testing.T) {
	budget := session.NewBudget(256<<20, 0)
	metrics := &session.Metrics{}
	url, conns := wsServer(t, session.Options{Budget: budget, Metrics: metrics, Limits: session.Limits{WriteTimeout: 500 * time.Millisecond}})
	_, stalled := dial(t, url, conns, true)
	good, gc := dial(t, url, conns, false)

	const size = 16 << 20
	done := make(chan error, 1)
	go func() { done <- stalled.Write(bytes.Repeat([]byte("x"), size)) }()
	waitFor(t, "the queued frame counted", func() bool { return budget.InUse() >= size })
	served(t, good, gc, 50)
	gc.Close()
	if err := <-done; err == nil {
		t.Fatal("the frame to a client that does not read was written")
	}
	waitFor(t, "the budget back to 0", func() bool { return budget.InUse() == 0 })
	if n := metrics.PeersDropped.Load(); n != 1 {
		t.Fatalf("peers dropped %d, want 1", n)
	}
}

// TestQueuedFramesOverBudget: a second frame queued behind one the client does not read, when
// the Budget cannot hold it, drops that client at once (no write timeout is waited for) and
// both its frames are released; a reading client sharing the Budget keeps being served.
func TestQueuedFramesOverBudget(t *testing.T) {
	budget := session.NewBudget(12<<20, 0)
	metrics := &session.Metrics{}
	url, conns := wsServer(t, session.Options{Budget: budget, Metrics: metrics, Limits: session.Limits{WriteTimeout: -1}})
	_, stalled := dial(t, url, conns, true)
	good, gc := dial(t, url, conns, false)

	const size = 8 << 20
	first := make(chan error, 1)
	go func() { first <- stalled.Write(bytes.Repeat([]byte("x"), size)) }()
	waitFor(t, "the queued frame counted", func() bool { return budget.InUse() >= size })
	if err := stalled.Write(bytes.Repeat([]byte("z"), size)); !errors.Is(err, session.ErrWriteBacklog) {
		t.Fatalf("a second frame over the budget: %v, want ErrWriteBacklog", err)
	}
	if err := <-first; err == nil {
		t.Fatal("the first frame was written to a client that does not read")
	}
	served(t, good, gc, 50)
	gc.Close()
	waitFor(t, "the budget back to 0", func() bool { return budget.InUse() == 0 })
	if n := metrics.PeersDropped.Load(); n != 1 {
		t.Fatalf("peers dropped %d, want 1", n)
	}
}
