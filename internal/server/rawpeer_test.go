package server

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// The WebSocket opcodes rawPeer reads and writes.
const (
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

// rawPeer is a WebSocket client on a bare TCP socket: unlike a WebSocket library, which
// answers each ping as soon as its read loop reaches it, it answers pings only when the test
// says so (pong), so that a test decides how late a pong is.
type rawPeer struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// dialRawWS opens a WebSocket to wsURL with the extra headers h; every read and write must end
// within a minute, or the test fails.
func dialRawWS(t *testing.T, wsURL string, h http.Header) *rawPeer {
	t.Helper()
	u, err := url.Parse(wsURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.Host+u.RequestURI(), nil)
	req.Header = h.Clone()
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Version", "13")
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(key))
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	return &rawPeer{t: t, c: c, br: br}
}

// write sends one client frame (masked, as RFC 6455 requires of clients).
func (p *rawPeer) write(opcode byte, payload []byte) {
	p.t.Helper()
	hdr := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	out := append(hdr, mask[:]...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	if _, err := p.c.Write(out); err != nil {
		p.t.Fatalf("writing a frame: %v", err)
	}
}

// send sends v as a text frame.
func (p *rawPeer) send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.write(opText, b)
}

// pong answers the ping whose payload is payload.
func (p *rawPeer) pong(payload []byte) {
	p.t.Helper()
	p.write(opPong, payload)
}

// next reads the next message: its opcode and payload (a fragmented message is joined; a
// close frame's payload is its code and reason).
func (p *rawPeer) next() (byte, []byte) {
	p.t.Helper()
	var msg []byte
	first := byte(0)
	for {
		var h [2]byte
		if _, err := io.ReadFull(p.br, h[:]); err != nil {
			p.t.Fatalf("the connection ended (the server dropped the peer, or closed without a close frame): %v", err)
		}
		fin, opcode, n := h[0]&0x80 != 0, h[0]&0x0f, uint64(h[1]&0x7f)
		switch n {
		case 126:
			var b [2]byte
			_, _ = io.ReadFull(p.br, b[:])
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			_, _ = io.ReadFull(p.br, b[:])
			n = binary.BigEndian.Uint64(b[:])
		}
		if h[1]&0x80 != 0 || n > 1<<30 {
			p.t.Fatalf("a frame the server may not send: header % x, length %d", h, n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(p.br, payload); err != nil {
			p.t.Fatalf("reading a frame's payload: %v", err)
		}
		if opcode >= opClose { // control frames come whole, also between fragments
			return opcode, payload
		}
		if opcode != 0 {
			first = opcode
		}
		msg = append(msg, payload...)
		if fin {
			return first, msg
		}
	}
}

// closeText describes a close frame's payload.
func closeText(payload []byte) string {
	if len(payload) < 2 {
		return "no status"
	}
	return fmt.Sprintf("status %d %q", binary.BigEndian.Uint16(payload), payload[2:])
}
