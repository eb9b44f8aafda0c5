package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// AppendSSE appends one Server-Sent Event, "event: T\ndata: D\n\n" (LF only),
// to dst. data is normally one line of JSON (AppendEvent's output); should it contain line
// breaks (CR, LF or CRLF), each line becomes its own "data:" line, which SSE readers join
// with "\n".
func AppendSSE(dst []byte, eventType string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, eventType...)
	dst = append(dst, "\ndata: "...)
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, "\ndata: "...)
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// SSEReader reads Server-Sent Events (for tests and clients). It accepts LF, CRLF and CR line
// ends, ignores comments (":…"), "id:" and "retry:" lines, joins several "data:" lines with
// "\n", and tolerates a missing "event:" line (the type is then ""; use the data's "type").
// Lines are read up to an LF, so a stream that ends lines with CR alone is split only when an
// LF or the end arrives. It is not safe for concurrent use.
//
// A reader made by NewSSEReader holds any line and event in memory; one made by
// NewSSEReaderLimit stops at its limit (ErrSSETooLong), so a peer that never ends a line or
// an event costs at most that many bytes.
type SSEReader struct {
	r         *bufio.Reader
	limit     int // the most bytes of one line and of one event's data; 0: none
	eventType string
	data      []byte
	buf       []byte   // the physical line being split
	queue     [][]byte // lines of buf not yet returned
}

// NewSSEReader returns a reader of the events in r, with no bound on a line or an event.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReader(r)}
}

// NewSSEReaderLimit returns a reader of the events in r that holds at most limit bytes of one
// physical line (its terminator included) and of the lines between two events (comments and
// other fields included): Next returns an error wrapping ErrSSETooLong as soon as either grows
// past limit, having read at most a few KiB beyond it. limit ≤ 0 means no bound
// (NewSSEReader).
func NewSSEReaderLimit(r io.Reader, limit int) *SSEReader {
	return &SSEReader{r: bufio.NewReader(r), limit: max(limit, 0)}
}

// ErrSSETooLong is wrapped by the error SSEReader.Next returns when a line or an event's data
// passes the reader's limit (NewSSEReaderLimit). The stream cannot be read further.
var ErrSSETooLong = errors.New("protocol: SSE line or event over the reader's limit")

// Next returns the next event with data. data is valid until the next call. At the end of
// the stream it returns an event still pending without its blank line (if any), then io.EOF;
// other read errors are returned as they are.
func (s *SSEReader) Next() (eventType string, data []byte, err error) {
	s.eventType, s.data = "", s.data[:0]
	haveData := false
	size := 0 // bytes of the lines read since the last event
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && haveData {
				return s.eventType, s.data, nil
			}
			return "", nil, err
		}
		if size += len(line) + 1; s.limit > 0 && size > s.limit {
			return "", nil, fmt.Errorf("%w: an event passed %d bytes", ErrSSETooLong, s.limit)
		}
		if len(line) == 0 {
			if haveData {
				return s.eventType, s.data, nil
			}
			s.eventType = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.eventType = string(value)
		case "data":
			if haveData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			haveData = true
		}
	}
}

// line returns the next line without its terminator (LF, CRLF or CR). A final line without
// terminator is returned before io.EOF.
func (s *SSEReader) line() ([]byte, error) {
	for len(s.queue) == 0 {
		s.buf = s.buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = s.r.ReadSlice('\n')
			if s.limit > 0 && len(s.buf)+len(chunk) > s.limit {
				return nil, fmt.Errorf("%w: a line passed %d bytes", ErrSSETooLong, s.limit)
			}
			s.buf = append(s.buf, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && (err != io.EOF || len(s.buf) == 0) {
			return nil, err
		}
		buf := s.buf
		if n := len(buf); n > 0 && buf[n-1] == '\n' {
			buf = buf[:n-1]
			if n > 1 && buf[n-2] == '\r' {
				buf = buf[:n-2]
			}
		}
		// CR alone also ends a line.
		for {
			i := bytes.IndexByte(buf, '\r')
			if i < 0 {
				break
			}
			s.queue = append(s.queue, buf[:i])
			buf = buf[i+1:]
		}
		s.queue = append(s.queue, buf)
	}
	line := s.queue[0]
	s.queue = s.queue[1:]
	return line, nil
}
