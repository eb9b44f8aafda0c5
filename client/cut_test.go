package client_test

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/wsguard"
	"github.com/tetherd/tether/internal/wstest"
)

// TestCutFrameIsConnectionLost: a server that ends the connection right after the header of a
// frame (as a write timeout leaves it) makes the rollout end with ErrConnectionLost naming the
// cut; the cut frame is never delivered, not even to Trace, as an empty message.
func TestCutFrameIsConnectionLost(t *testing.T) {
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`
	url := wstest.RawServer(t, nil, func(c net.Conn, br *bufio.Reader) {
		if _, err := br.ReadByte(); err != nil { // the create has begun to arrive
			return
		}
		out := wstest.ServerFrame(true, 1, []byte(created))
		out = append(out, 0x81, 126, 0x10, 0x00) // the header of a 4096-byte frame, then the end
		_, _ = c.Write(out)
	})

	var mu sync.Mutex
	var received []string
	c := dial(t, url+"/v1", &client.Options{PublicShape: true, Trace: func(sent bool, frame []byte) {
		if !sent {
			mu.Lock()
			received = append(received, string(frame))
			mu.Unlock()
		}
	}})
	_, err := c.Run(ctxT(t), client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage("hi")}}, client.RunOptions{})
	if !errors.Is(err, client.ErrConnectionLost) || !errors.Is(err, wsguard.ErrCutOff) {
		t.Fatalf("Run: %v; want ErrConnectionLost naming the cut frame", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 1 || received[0] != created {
		t.Fatalf("frames received: %q; want only response.created", received)
	}
}
