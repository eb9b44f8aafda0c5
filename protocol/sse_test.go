package protocol

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestAppendSSE(t *testing.T) {
	for _, tc := range []struct{ typ, data, want string }{
		{string(EventCreated), `{"type":"response.created"}`, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n"},
		{"x", "a\nb\r\nc\rd", "event: x\ndata: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"x", "", "event: x\ndata: \n\n"},
	} {
		if got := string(AppendSSE(nil, tc.typ, []byte(tc.data))); got != tc.want {
			t.Errorf("AppendSSE(%q, %q) = %q, want %q", tc.typ, tc.data, got, tc.want)
		}
	}
}

type sseEvent struct{ typ, data string }

func readAll(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	sr := NewSSEReader(r)
	var evs []sseEvent
	for {
		typ, data, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, sseEvent{typ, string(data)})
	}
}

func TestSSEReader(t *testing.T) {
	stream := string(AppendSSE(nil, string(EventCreated), []byte(`{"a":1}`))) +
		": comment\r\nid: 7\r\nretry: 10\r\nevent: two\r\ndata: x\r\ndata:y\r\n\r\n" +
		"data: no event line\n\n" +
		"event: cr\rdata: lone CR\r\r" +
		"event: orphan\n\n" + // no data: not dispatched
		"event: multi\ndata: a\n\ndata: b\n\n" +
		"data: at EOF without blank line"
	want := []sseEvent{
		{string(EventCreated), `{"a":1}`},
		{"two", "x\ny"},
		{"", "no event line"},
		{"cr", "lone CR"},
		{"multi", "a"},
		{"", "b"},
		{"", "at EOF without blank line"},
	}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(stream),
		"one byte": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		got := readAll(t, r)
		if len(got) != len(want) {
			t.Fatalf("%s: got %q, want %q", name, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: event %d = %q, want %q", name, i, got[i], want[i])
			}
		}
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	data := strings.Repeat("x", 100_000)
	got := readAll(t, strings.NewReader(string(AppendSSE(nil, "big", []byte(data)))))
	if len(got) != 1 || got[0].data != data {
		t.Fatalf("long line lost: %d events", len(got))
	}
}

func TestSSEReaderError(t *testing.T) {
	boom := errors.New("boom")
	sr := NewSSEReader(io.MultiReader(strings.NewReader("data: x\n"), iotest.ErrReader(boom)))
	if _, _, err := sr.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}
