package client_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/wstest"
)

// silentOnClose serves one WebSocket that reads the client's frames and never answers: not
// the create, not the close frame. It sends the close frame's status on closeFrame and
// closes hungUp when the client has ended the TCP connection.
func silentOnClose(t *testing.T) (url string, closeFrame <-chan int, hungUp <-chan struct{}) {
	cf, hu := make(chan int, 1), make(chan struct{})
	url = wstest.RawServer(t, nil, func(c net.Conn, br *bufio.Reader) {
		defer close(hu)
		for {
			op, payload, err := readClientFrame(br)
			if err != nil {
				return // the client hung up
			}
			if op == 8 && len(payload) >= 2 {
				cf <- int(binary.BigEndian.Uint16(payload))
			}
		}
	})
	return url, cf, hu
}

// readClientFrame reads one masked client frame: its opcode and unmasked payload.
func readClientFrame(br *bufio.Reader) (byte, []byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var mask [4]byte
	if _, err := io.ReadFull(br, mask[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		return 0, nil, err
	}
	for i := range p {
		p[i] ^= mask[i%4]
	}
	return hdr[0] & 0x0f, p, nil
}

// TestCloseUnanswered: against a server that never answers the close handshake, Close sends
// the close frame (1000), gives up after DefaultCloseTimeout instead of the WebSocket
// library's 5 s, says so, and hangs up; the rollout that was waiting gets ErrClosed.
func TestCloseUnanswered(t *testing.T) {
	url, closeFrame, hungUp := silentOnClose(t)
	c := dial(t, url+"/v1", nil)
	ctx := ctxT(t)
	r := mustStart(t, c, "never answered")
	start := time.Now()
	err := c.Close()
	t.Logf("Close took %v", time.Since(start))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v; want the unanswered handshake, context.DeadlineExceeded", err)
	}
	if st := <-closeFrame; st != 1000 {
		t.Errorf("close frame status %d, want 1000", st)
	}
	select {
	case <-hungUp:
	case <-ctx.Done():
		t.Fatal("the client did not hang up")
	}
	var got error
	for _, err := range r.Events(ctx) {
		got = err
	}
	if !errors.Is(got, client.ErrClosed) {
		t.Errorf("Events: %v, want ErrClosed", got)
	}
}

// TestCloseContext: CloseContext gives up waiting for the server's close frame when its ctx
// ends, here as soon as the server has read the client's close frame, and returns ctx's error.
func TestCloseContext(t *testing.T) {
	url, closeFrame, hungUp := silentOnClose(t)
	c := dial(t, url+"/v1", nil)
	ctx := ctxT(t)
	r := mustStart(t, c, "never answered")
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-closeFrame:
		case <-ctx.Done():
		}
		cancel()
	}()
	if err := c.CloseContext(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("CloseContext: %v, want context.Canceled", err)
	}
	select {
	case <-hungUp:
	case <-ctx.Done():
		t.Fatal("the client did not hang up")
	}
	var got error
	for _, err := range r.Events(ctx) {
		got = err
	}
	if !errors.Is(got, client.ErrClosed) {
		t.Errorf("Events: %v, want ErrClosed", got)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}

// TestCloseWhileRedialing: the server ends the first WebSocket with 1001 (going away); the
// next Start dials again, to a listener that accepts the TCP connection and never answers the
// upgrade. Close does not wait for that dial (Options.DialTimeout is a minute, Start's ctx
// 30 s): the dial gives up at once, Start returns ErrClosed and Close returns.
func TestCloseWhileRedialing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dialing := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			req, err := http.ReadRequest(br)
			if err != nil {
				c.Close()
				return
			}
			if i == 0 {
				upgrade(c, req)
				_, _ = c.Write(wstest.ServerFrame(true, 8, []byte{0x03, 0xe9})) // close 1001
				_, _ = io.Copy(io.Discard, br)
				c.Close()
				continue
			}
			close(dialing)
			_, _ = io.Copy(io.Discard, br) // until the client gives up
			c.Close()
			return
		}
	}()
	t.Cleanup(func() { ln.Close(); <-served })
	ctx := ctxT(t)
	c, err := client.Dial(ctx, "ws://"+ln.Addr().String()+"/v1", &client.Options{DialTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	<-c.LinkDone()
	started := make(chan error, 1)
	go func() {
		_, err := c.Start(ctx, twoCalls("on a new connection"))
		started <- err
	}()
	select {
	case <-dialing:
	case <-ctx.Done():
		t.Fatal("no redial")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// The dial ended because of Close, not at a deadline (Start's ctx ends after 30 s).
	if err := <-started; !errors.Is(err, client.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start: %v, want ErrClosed, the dial cut short by Close", err)
	}
}

// upgrade answers a WebSocket upgrade with 101.
func upgrade(c net.Conn, req *http.Request) {
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
}

// TestCloseWhileWriteBlocked: the server reads nothing, so a large create fills the socket
// buffers (the client's send buffer is made small) and its write blocks, holding the
// connection's writer: the close frame cannot be written. Close still returns after its
// bound, saying the server did not answer, and the blocked Start returns ErrClosed.
func TestCloseWhileWriteBlocked(t *testing.T) {
	release := make(chan struct{})
	url := wstest.RawServer(t, nil, func(net.Conn, *bufio.Reader) { <-release })
	t.Cleanup(func() { close(release) })
	small := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			err = c.(*net.TCPConn).SetWriteBuffer(4096)
		}
		return c, err
	}}
	sending := make(chan struct{}, 1)
	c := dial(t, url+"/v1", &client.Options{HTTPClient: &http.Client{Transport: small}, Trace: func(sent bool, _ []byte) {
		if sent {
			sending <- struct{}{}
		}
	}})
	ctx := ctxT(t)
	q := twoCalls(strings.Repeat("x", 1<<20)) // far more than the socket buffers hold
	started := make(chan error, 1)
	go func() {
		_, err := c.Start(ctx, q)
		started <- err
	}()
	select {
	case <-sending:
	case err := <-started:
		t.Fatalf("Start returned before Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v; want the unanswered handshake, context.DeadlineExceeded", err)
	}
	if err := <-started; !errors.Is(err, client.ErrClosed) {
		t.Errorf("Start: %v, want ErrClosed", err)
	}
}
