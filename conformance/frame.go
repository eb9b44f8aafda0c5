package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Frame is one decoded JSON object from the server: a WebSocket frame, an SSE event's data, or
// an HTTP body.
type Frame map[string]any

// Type is the frame's "type" member ("" if absent).
func (f Frame) Type() string { s, _ := f["type"].(string); return s }

// Get is the value at path (nil if absent).
func (f Frame) Get(path ...string) any {
	var v any = map[string]any(f)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// Has reports whether the member at path is present (it may be null).
func (f Frame) Has(path ...string) bool {
	if len(path) == 0 {
		return true
	}
	parent, ok := f.Get(path[:len(path)-1]...).(map[string]any)
	if !ok {
		return false
	}
	_, ok = parent[path[len(path)-1]]
	return ok
}

// Str is the string at path ("" if absent or not a string).
func (f Frame) Str(path ...string) string { s, _ := f.Get(path...).(string); return s }

// Int is the integer at path; ok is false if it is absent or not an integral number.
func (f Frame) Int(path ...string) (n int, ok bool) {
	v, isNum := f.Get(path...).(float64)
	if !isNum || v != float64(int(v)) {
		return 0, false
	}
	return int(v), true
}

// Num is the integer at path, -1 if absent.
func (f Frame) Num(path ...string) int {
	if n, ok := f.Int(path...); ok {
		return n
	}
	return -1
}

// List is the array at path (nil if absent).
func (f Frame) List(path ...string) []any { l, _ := f.Get(path...).([]any); return l }

// Obj is the object at path (nil if absent).
func (f Frame) Obj(path ...string) Frame {
	m, _ := f.Get(path...).(map[string]any)
	return Frame(m)
}

// String is the frame's compact JSON.
func (f Frame) String() string { return compact(f) }

// decodeFrame decodes one JSON object.
func decodeFrame(data []byte) (Frame, error) {
	var f Frame
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return f, nil
}

// compact is v as compact JSON with sorted keys.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// clip shortens s to at most n bytes for a failure report.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d bytes)", len(s))
}

// sameJSON reports whether a and b encode to the same JSON (object keys sorted; nil and an
// empty array are the same).
func sameJSON(a, b any) bool {
	if isEmpty(a) && isEmpty(b) {
		return true
	}
	return compact(normalize(a)) == compact(normalize(b))
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	}
	return false
}

// normalize round-trips v through JSON so Frame, map[string]any and []map[string]any compare.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// items returns the objects of a JSON array.
func items(l []any) []Frame {
	out := make([]Frame, 0, len(l))
	for _, v := range l {
		m, _ := v.(map[string]any)
		out = append(out, Frame(m))
	}
	return out
}

// messageText is the concatenated output_text of the message items in output.
func messageText(output []any) string {
	var b strings.Builder
	for _, it := range items(output) {
		if it.Type() != "message" {
			continue
		}
		for _, p := range items(it.List("content")) {
			if p.Type() == "output_text" {
				b.WriteString(p.Str("text"))
			}
		}
	}
	return b.String()
}

// fingerprint is the sim's context fingerprint at the end of an answer ("[ctx N tokens 0x…]"),
// or "".
func fingerprint(text string) string {
	i := strings.LastIndex(text, "[ctx ")
	if i < 0 {
		return ""
	}
	j := strings.Index(text[i:], "]")
	if j < 0 {
		return ""
	}
	return text[i : i+j+1]
}
