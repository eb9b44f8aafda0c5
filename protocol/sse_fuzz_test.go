package protocol

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzSSERoundTrip writes events with AppendSSE and reads them back with SSEReader: every
// event comes back with its type and its data (line breaks normalised to "\n", as SSE joins
// data lines). Event types and data come from the fuzzer; types are single-line tokens.
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("response.output_text.delta", []byte(`{"type":"response.output_text.delta","delta":"hi"}`), 2)
	f.Add("response.completed", []byte("{\"a\":\"line\\nbreak\"}"), 1)
	f.Add("x", []byte("multi\nline\r\ndata\rhere"), 3)
	f.Add("error", []byte(""), 1)
	f.Add("e", []byte(strings.Repeat(" \n", 1000)), 1)
	f.Fuzz(func(t *testing.T, typ string, data []byte, n int) {
		if typ == "" || strings.ContainsAny(typ, "\r\n") || strings.TrimSpace(typ) != typ {
			t.Skip()
		}
		n = 1 + (n&7+8)%8
		var stream []byte
		for i := 0; i < n; i++ {
			stream = AppendSSE(stream, typ, data)
		}
		want := normaliseLines(data)
		r := NewSSEReader(bytes.NewReader(stream))
		for i := 0; i < n; i++ {
			gotType, got, err := r.Next()
			if err != nil {
				if len(data) == 0 && err == io.EOF {
					return // an event without data is not delivered
				}
				t.Fatalf("event %d: %v", i, err)
			}
			if gotType != typ || !bytes.Equal(got, want) {
				t.Fatalf("event %d: got (%q, %q), want (%q, %q)", i, gotType, got, typ, want)
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("after %d events: %v, want EOF", n, err)
		}
	})
}

func normaliseLines(b []byte) []byte {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	return []byte(strings.ReplaceAll(s, "\r", "\n"))
}
