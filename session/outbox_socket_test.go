package session_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/wstransport"
)

// heldTransport is a real WebSocket transport whose first batch write waits until the
// transport is aborted, as a write to a client that stopped reading waits until the write
// timeout drops it; then the write goes to the aborted socket and fails.
type heldTransport struct {
	session.Transport
	entered chan struct{} // closed when the first batch write begins
	aborted chan struct{} // closed by Abort
	once    sync.Once
	first   sync.Once
}

func (h *heldTransport) WriteBatch(ctx context.Context, frames [][]byte) error {
	h.first.Do(func() {
		close(h.entered)
		<-h.aborted
	})
	return h.Transport.(session.BatchWriter).WriteBatch(ctx, frames)
}

func (h *heldTransport) Abort() error {
	err := h.Transport.Abort() // the socket first, so that the held write fails
	h.once.Do(func() { close(h.aborted) })
	return err
}

// TestOutboxLargeFrameBehindFailedWrite: a frame too large to be copied into the outbox,
// queued behind a batch whose network write then fails (the client stopped reading and is
// dropped), gets that error from its Write like every other writer, instead of waiting for
// ever for a write that will not happen (and holding the connection's write lock, so that
// every later Write waited too).
func TestOutboxLargeFrameBehindFailedWrite(t *testing.T) {
	held := make(chan *heldTransport, 1)
	conns := make(chan *session.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := wstransport.Accept(w, r, nil)
		if err != nil {
			return
		}
		h := &heldTransport{Transport: a.Transport(0, nil, 0, ""), entered: make(chan struct{}), aborted: make(chan struct{})}
		held <- h
		c := session.NewConn(h, session.Options{})
		conns <- c
		<-c.Done()
	}))
	defer srv.Close()
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	h, c := <-held, <-conns
	defer c.Close()

	if err := c.Write([]byte(`{"type":"small"}`)); err != nil {
		t.Fatal(err)
	}
	<-h.entered // the flusher is writing the small frame's batch
	large := make(chan error, 1)
	go func() { large <- c.Write(bytes.Repeat([]byte("L"), 32<<10)) }()
	waitFor(t, "the large frame queued behind the batch in flight", func() bool { return session.OutboxFrames(c) == 1 })
	_ = h.Abort() // the write timeout drops the client: the batch in flight fails

	select {
	case err := <-large:
		if err == nil {
			t.Fatal("the large frame's Write succeeded on an aborted connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the large frame's Write still waits 10 s after the write before it failed")
	}
	if err := c.Write([]byte(`{"type":"late"}`)); err == nil {
		t.Fatal("a Write after the failed write succeeded")
	}
}
