// Package wsguard makes a WebSocket connection that ends inside a message an error for
// github.com/coder/websocket clients.
//
// At the version this module pins, Conn.Read returns a message cut off by the end of the
// connection as if it were whole, with a nil error: when the stream ends right after a frame
// header, or at the boundary of one of the library's internal payload reads, or between the
// fragments of a message, the io.EOF of the payload read is wrapped ("failed to read frame
// payload: EOF"), and the message reader takes any error that wraps io.EOF for the end of the
// message. A server that drops a client for its write timeout leaves exactly that behind: the
// client, reading again, gets an empty or truncated text message and no error.
//
// [Client] wraps an http.Client so that the bodies of its 101 answers (the stream the library
// reads frames from) follow the frame boundaries: an end of stream inside a frame header, a
// frame's payload or a fragmented message becomes [ErrCutOff] instead of io.EOF, which the
// library reports as a read error. Frames are tracked, not altered; a stream that ends
// between whole messages still ends with io.EOF.
package wsguard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrCutOff is the read error of a WebSocket connection that ended inside a frame or inside a
// fragmented message; Conn.Read returns an error that wraps it.
var ErrCutOff = errors.New("the connection ended inside a WebSocket message")

// Client returns a copy of hc (nil: http.DefaultClient) whose transport guards the streams of
// WebSocket upgrades (101 answers); other answers pass through unchanged. Use it as
// websocket.DialOptions.HTTPClient.
func Client(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(transport); !ok {
		c.Transport = transport{base}
	}
	return &c
}

// transport wraps the body of a 101 answer in a Stream.
type transport struct{ base http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, err
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &Stream{rwc: rwc}
	}
	return resp, nil
}

// Stream is the server-to-client byte stream of one WebSocket connection, read through a
// tracker of frame boundaries (RFC 6455 section 5.2). Writes and Close pass through.
type Stream struct {
	rwc io.ReadWriteCloser

	hdr     [14]byte // the frame header being read
	hdrN    int      // bytes of hdr read
	payload int64    // payload bytes of the current frame still to come
	midMsg  bool     // the last data frame had FIN clear: a continuation is owed
}

// Read reads from the stream; an end of stream inside a frame or a fragmented message is
// [ErrCutOff], never io.EOF. (Not io.ErrUnexpectedEOF either: the library takes that for the
// end of a compressed message.)
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.rwc.Read(p)
	s.track(p[:n])
	if errors.Is(err, io.EOF) {
		if where := s.inside(); where != "" {
			return n, fmt.Errorf("%w (%s)", ErrCutOff, where)
		}
	}
	return n, err
}

// Write writes to the stream.
func (s *Stream) Write(p []byte) (int, error) { return s.rwc.Write(p) }

// Close closes the stream.
func (s *Stream) Close() error { return s.rwc.Close() }

// inside says where the stream is when it is inside a frame or message; "" between messages.
func (s *Stream) inside() string {
	switch {
	case s.hdrN > 0:
		return fmt.Sprintf("after %d bytes of a frame header", s.hdrN)
	case s.payload > 0:
		return fmt.Sprintf("%d bytes short of the end of a frame", s.payload)
	case s.midMsg:
		return "between the fragments of a message"
	}
	return ""
}

// track advances the frame tracker over b.
func (s *Stream) track(b []byte) {
	for len(b) > 0 {
		if s.payload > 0 {
			k := min(int64(len(b)), s.payload)
			s.payload -= k
			b = b[k:]
			continue
		}
		s.hdr[s.hdrN] = b[0]
		s.hdrN++
		b = b[1:]
		need := headerLen(s.hdr[:s.hdrN])
		if s.hdrN < need {
			continue
		}
		s.endHeader()
	}
}

// headerLen is the length of the header that starts with h (2 while only one byte is known).
func headerLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4 // masking key
	}
	return n
}

// endHeader takes in a complete header.
func (s *Stream) endHeader() {
	h := s.hdr[:s.hdrN]
	s.hdrN = 0
	fin, opcode := h[0]&0x80 != 0, h[0]&0x0f
	var length uint64
	switch l := h[1] & 0x7f; l {
	case 126:
		length = uint64(h[2])<<8 | uint64(h[3])
	case 127:
		for _, c := range h[2:10] {
			length = length<<8 | uint64(c)
		}
	default:
		length = uint64(l)
	}
	s.payload = int64(length & (1<<63 - 1)) // the library rejects a length with the top bit set
	// A data frame (continuation, text, binary) tells whether a continuation is owed; control
	// frames, never fragmented, may come between the fragments and change nothing.
	if opcode&0x08 == 0 {
		s.midMsg = !fin
	}
}
