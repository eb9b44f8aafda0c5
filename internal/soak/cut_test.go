package soak

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/tetherd/tether/internal/wsguard"
	"github.com/tetherd/tether/internal/wstest"
)

// TestReaderCutFrame: the soak's reader, on a connection the server ends right after a frame
// header (what a stalled reader finds when it reads again after the server dropped it for its
// write timeout), gets the whole frames, then a read error — which the soak counts as the
// server's drop — not an empty frame, which it would count as a protocol violation.
func TestReaderCutFrame(t *testing.T) {
	created := []byte(`{"type":"response.created","sequence_number":0}`)
	url := wstest.RawServer(t, nil, func(c net.Conn, _ *bufio.Reader) {
		out := wstest.ServerFrame(true, 1, created)
		out = append(out, 0x81, 126, 0x10, 0x00) // the header of a 4096-byte frame, then the end
		_, _ = c.Write(out)
	})
	tg := &target{wsURL: url, client: &http.Client{}}
	c, err := tg.dial(t.Context(), publicShape)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(false)
	if f, err := c.read(context.Background()); err != nil || string(f.data) != string(created) {
		t.Fatalf("first frame %q, %v", f.data, err)
	}
	if f, err := c.read(context.Background()); !errors.Is(err, wsguard.ErrCutOff) {
		t.Fatalf("after the cut: frame %q (%q), error %v; want an error naming the cut", f.data, f.typ, err)
	}
}
