package protocol

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// endless reads a pattern forever and counts the bytes it handed out.
type endless struct {
	pattern string
	n       int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.pattern[(e.n+i)%len(e.pattern)]
	}
	e.n += len(p)
	return len(p), nil
}

// TestSSEReaderLimit: a line that never ends and data lines that never end an event each stop
// at the limit, having read little past it; an event at the limit passes.
func TestSSEReaderLimit(t *testing.T) {
	const limit = 64 << 10
	for _, tc := range []struct{ name, pattern, says string }{
		{"line", "x", "a line passed"},
		{"event", "data: 0123456789\n", "an event passed"},
		{"crlf event", "data: abc\r\n", "an event passed"},
		{"comments", ":\n", "an event passed"},
	} {
		src := &endless{pattern: tc.pattern}
		_, _, err := NewSSEReaderLimit(src, limit).Next()
		if !errors.Is(err, ErrSSETooLong) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err %v, want ErrSSETooLong saying %q", tc.name, err, tc.says)
		}
		if src.n > limit+8<<10 {
			t.Errorf("%s: read %d bytes for a limit of %d", tc.name, src.n, limit)
		}
	}

	data := strings.Repeat("y", limit-len("data: a\ndata: \n\n"))
	r := NewSSEReaderLimit(strings.NewReader("data: a\ndata: "+data+"\n\n"), limit)
	if _, got, err := r.Next(); err != nil || string(got) != "a\n"+data {
		t.Fatalf("an event at the limit: %d bytes, err %v", len(got), err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after it: %v", err)
	}
}
