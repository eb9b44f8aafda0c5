package wstest

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"testing"
)

// RawServer accepts one WebSocket upgrade on a loopback socket and answers 101 by hand, with
// the extra headers h (nil: none); serve then writes raw frame bytes to c (server frames are
// unmasked) and may read the client's frames from br. When serve returns, the server ends
// the stream (FIN) and drains what the client still writes until it hangs up, so that unread
// data never turns the end into a reset. It returns the ws:// URL; the listener closes at test
// cleanup. It stands in for a server that drops a client in the middle of a frame.
func RawServer(t testing.TB, h http.Header, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(sum[:]) + "\r\n"
		for k, vs := range h {
			for _, v := range vs {
				resp += k + ": " + v + "\r\n"
			}
		}
		if _, err := io.WriteString(c, resp+"\r\n"); err != nil {
			return
		}
		serve(c, br)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, br)
	}()
	return "ws://" + ln.Addr().String()
}

// ServerFrame returns one unmasked server frame: fin, opcode (1 text, 2 binary, 0
// continuation, 9 ping), payload of any length.
func ServerFrame(fin bool, opcode byte, payload []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	n := len(payload)
	var hdr []byte
	switch {
	case n < 126:
		hdr = []byte{b0, byte(n)}
	case n < 1<<16:
		hdr = []byte{b0, 126, byte(n >> 8), byte(n)}
	default:
		hdr = []byte{b0, 127, 0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	return append(hdr, payload...)
}
