package wstransport

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/session"
)

// TestLargeFrameRead: over a real socket, frames past the 1 MiB a buffer grows to are read in
// pieces and arrive whole; one the budget cannot cover is refused (ErrOverloaded) with its
// bytes given back, and the connection reads the next frame.
func TestLargeFrameRead(t *testing.T) {
	budget := session.NewBudget(64<<20, 0)
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 4)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		tr := NewBudget(c, 32<<20, budget)
		for range 3 {
			b, err := tr.Read(r.Context())
			got <- read{bytes.Clone(b), err}
			if err != nil && !errors.Is(err, session.ErrOverloaded) {
				return
			}
		}
		_, _ = tr.Read(r.Context()) // releases the last frame; ends when the client closes
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	big := []byte(`"` + strings.Repeat("abcdefgh", 3<<20/8) + `"`) // 3 MiB: four 4× reservations fit in 64 MiB
	huge := []byte(`"` + strings.Repeat("x", 20<<20) + `"`)        // 20 MiB: 4× is over the budget
	for i, f := range [][]byte{big, huge, []byte(`{"type":"small"}`)} {
		if err := c.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatal(err)
		}
		r := <-got
		switch i {
		case 0:
			if r.err != nil || !bytes.Equal(r.b, big) {
				t.Fatalf("3 MiB frame: %d bytes, %v", len(r.b), r.err)
			}
		case 1:
			if !errors.Is(r.err, session.ErrOverloaded) {
				t.Fatalf("20 MiB frame over the budget: %d bytes, %v", len(r.b), r.err)
			}
		case 2:
			if r.err != nil || string(r.b) != `{"type":"small"}` {
				t.Fatalf("frame after the refused one: %q, %v", r.b, r.err)
			}
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	<-done
	if n := budget.InUse(); n != 0 {
		t.Fatalf("budget in use after the connection: %d", n)
	}
}
