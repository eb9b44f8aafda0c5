package wstransport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingConn counts the writes to the network.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestWriteBatchOneNetworkWrite: over a real socket, a batch of frames arrives whole and in
// order, sent with one write to the network; a frame written alone is sent as usual.
func TestWriteBatchOneNetworkWrite(t *testing.T) {
	counted := make(chan *countingConn, 1)
	wrote := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := Accept(w, r, nil)
		if err != nil {
			wrote <- err
			return
		}
		cc := &countingConn{Conn: a.cork.Conn}
		a.cork.Conn = cc
		counted <- cc
		tr := a.Transport(0, nil, 0, "").(*wsTransport)
		frames := make([][]byte, 20)
		for i := range frames {
			frames[i] = fmt.Appendf(nil, `{"type":"event","n":%d}`, i)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		err = tr.WriteBatch(ctx, frames)
		if err == nil {
			err = tr.Write(ctx, []byte(`{"type":"last"}`))
		}
		wrote <- err
		_, _, _ = a.Conn.Read(ctx) // until the client closes
		_ = a.Conn.CloseNow()
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for i := range 21 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		want := fmt.Sprintf(`{"type":"event","n":%d}`, i)
		if i == 20 {
			want = `{"type":"last"}`
		}
		if string(b) != want {
			t.Fatalf("frame %d is %s, want %s", i, b, want)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if n := (<-counted).writes.Load(); n != 2 {
		t.Fatalf("%d network writes for a batch of 20 frames and one frame, want 2", n)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}
