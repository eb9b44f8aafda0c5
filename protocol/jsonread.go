package protocol

// Why the protocol package reads JSON by hand instead of with encoding/json.Unmarshal:
//
//   - Strictness with param paths. Every type error names the offending value the way OpenAI
//     does ("input[3].content[0].text", "tools[1].parameters"), numbers that do not fit a
//     float64 are rejected even in ignored members, repeated top-level members are rejected,
//     and a "type" member selects the shape of a union before its other members are read.
//     Unmarshal's type errors carry a dotted field path without array indices, and unions
//     (string or array, objects keyed by "type") need a second pass over json.RawMessage.
//   - No reflection and the standard library only: the reader walks the validated bytes without
//     an intermediate tree, keeps paths on the stack and copies only the strings and raw values
//     it keeps.
//
// The cost is measured by BenchmarkDecodeCreateTypical (a response.create with 4 tools and 20
// items, 3.3 KB) against Unmarshal into an equivalent struct that checks only JSON types:
//
//	go test -run XXX -bench BenchmarkDecodeCreateTypical -benchtime 10000x -count 5 ./protocol/
//
// One run (2 shared cores, medians): DecodeClientEvent 51 µs/op, 23.2 KB/op, 200 allocs/op;
// encoding/json 70 µs/op, 13.5 KB/op, 138 allocs/op: about 1.4× faster, with 1.45× the
// allocations, about half of which are the bounds pass's paths (checkBounds, bounds.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// reader walks a JSON text that validJSON has already accepted, so it can skip most syntax
// checks. It never panics on any input: every index is bounds-checked, and on malformed input
// it simply stops. Strings are decoded without allocation beyond the result when they contain
// no escapes and are valid UTF-8; otherwise unquote decodes them exactly as encoding/json does
// (escapes, U+FFFD for invalid UTF-8 and unpaired surrogates).
type reader struct {
	data []byte
	pos  int
	noun string // what data is, for error messages: "frame" (the zero value) or "request body"
}

// what names the text being read in an error message.
func (r *reader) what() string {
	if r.noun == "" {
		return "frame"
	}
	return r.noun
}

// ws skips insignificant whitespace.
func (r *reader) ws() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the first byte of the next token, or 0 at the end.
func (r *reader) peek() byte {
	r.ws()
	if r.pos < len(r.data) {
		return r.data[r.pos]
	}
	return 0
}

// open consumes the '{' or '[' at the current position (after peek).
func (r *reader) open() {
	if r.pos < len(r.data) {
		r.pos++
	}
}

// member advances to the next member of the object being read: it consumes a separating ','
// and returns the unescaped key with the reader at the member's value; after the last member
// it consumes '}' and returns ok=false. The key aliases the input unless it had escapes.
func (r *reader) member() (key []byte, ok bool) {
	c := r.peek()
	if c == ',' {
		r.pos++
		c = r.peek()
	}
	if c != '"' {
		r.open() // '}'
		return nil, false
	}
	key = r.strBytes()
	if r.peek() == ':' {
		r.pos++
	}
	r.ws()
	return key, true
}

// memberFunc reads one member of an object for reader.object: key is the member's unescaped
// name and the reader is at its value. It may leave the value unread; object then skips it with
// skipChecked.
type memberFunc func(key []byte) *Error

// object reads the object at r.pos (after peek) member by member with fn and returns fn's first
// error. A value that is not an object is invalid_type ("expected an object") at p; a caller
// that allows null checks for it first (optObject). fn gets the key, not the member's path, so
// that no path escapes through the indirect call: callers build it on their stack.
func (r *reader) object(p *path, fn memberFunc) *Error {
	if c := r.peek(); c != '{' {
		return errType(p, "an object", c)
	}
	r.open()
	for {
		key, ok := r.member()
		if !ok {
			return nil
		}
		start := r.pos
		if err := fn(key); err != nil {
			return err
		}
		if r.pos == start {
			if err := r.skipChecked(&path{parent: p, key: key, index: -1}); err != nil {
				return err
			}
		}
	}
}

// optObject is object for a value that may be null: null is consumed and reported as
// found=false.
func (r *reader) optObject(p *path, fn memberFunc) (found bool, err *Error) {
	if r.null() {
		return false, nil
	}
	return true, r.object(p, fn)
}

// elem advances to the next element of the array being read, consuming a separating ','; after
// the last element it consumes ']' and returns false.
func (r *reader) elem() bool {
	c := r.peek()
	if c == ',' {
		r.pos++
		c = r.peek()
	}
	if c == ']' || c == 0 {
		r.open()
		return false
	}
	return true
}

// strClass classifies string bytes for endString: 1 ends the string ('"'), 2 starts an escape,
// 3 is non-ASCII.
var strClass = func() (t [256]uint8) {
	t['"'], t['\\'] = 1, 2
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = 3
	}
	return t
}()

// endString moves past the string token at r.pos and returns its raw content (between the
// quotes, escapes not processed). plain reports that the content is ASCII without escapes,
// so it needs no decoding; when false, callers check for themselves.
func (r *reader) endString() (content []byte, plain bool) {
	d := r.data
	start := r.pos + 1
	if start > len(d) {
		r.pos = len(d)
		return nil, false
	}
	// Short strings (keys, ids): one table-driven pass.
	i := start
	plain = true
	for ; i < len(d) && i-start < 64; i++ {
		switch strClass[d[i]] {
		case 1:
			r.pos = i + 1
			return d[start:i], plain
		case 2:
			plain = false
			i++
		case 3:
			plain = false
		}
	}
	// Long strings: find the closing quote with IndexByte.
	i = min(i, len(d))
	for {
		j := bytes.IndexByte(d[i:], '"')
		if j < 0 {
			r.pos = len(d)
			return d[start:], false
		}
		k := i + j
		n := 0
		for m := k - 1; m >= start && d[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			r.pos = k + 1
			return d[start:k], false
		}
		i = k + 1
	}
}

// strBytes reads a string token and returns its decoded bytes (aliasing the input when the
// token needs no decoding).
func (r *reader) strBytes() []byte {
	content, plain := r.endString()
	if plain || bytes.IndexByte(content, '\\') < 0 && utf8.Valid(content) {
		return content
	}
	return unquote(make([]byte, 0, len(content)), content)
}

// str reads a string token and returns it as a new string.
func (r *reader) str() string {
	content, plain := r.endString()
	if plain || bytes.IndexByte(content, '\\') < 0 && utf8.Valid(content) {
		return string(content)
	}
	return string(unquote(make([]byte, 0, len(content)), content))
}

// isDelim reports whether c ends a number or literal token.
func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// token moves past a number or literal token and returns it.
func (r *reader) token() []byte {
	start := r.pos
	for r.pos < len(r.data) && !isDelim(r.data[r.pos]) {
		r.pos++
	}
	return r.data[start:r.pos]
}

// skip moves past the next value without looking into it (numbers are not range-checked).
func (r *reader) skip() {
	switch r.peek() {
	case '"':
		r.endString()
	case '{', '[':
		depth := 0
		for r.pos < len(r.data) {
			switch r.data[r.pos] {
			case '"':
				r.endString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					r.pos++
					return
				}
			}
			r.pos++
		}
	case 0:
	default:
		r.token()
	}
}

// skipChecked moves past the next value, checking that every number in it fits a float64
// (encoding/json cannot decode 1e400). It returns an invalid_type error naming the number's
// path otherwise.
func (r *reader) skipChecked(p *path) *Error {
	segs, num, ok := r.checkValue()
	if ok {
		return nil
	}
	b := p.appendTo(nil)
	for i := len(segs) - 1; i >= 0; i-- {
		b = segs[i].appendTo(b)
	}
	return errRangeParam(string(b), num)
}

// checkValue is skipChecked's recursion. It keeps no pointers to the caller's path (so the
// path nodes stay on the stack); on failure it returns the offending number and the path
// segments below the value, innermost first.
func (r *reader) checkValue() (segs []path, num []byte, ok bool) {
	switch r.peek() {
	case '"':
		r.endString()
	case '{':
		r.open()
		for {
			key, more := r.member()
			if !more {
				return nil, nil, true
			}
			if segs, num, ok := r.checkValue(); !ok {
				return append(segs, path{key: key, index: -1}), num, false
			}
		}
	case '[':
		r.open()
		for i := 0; r.elem(); i++ {
			if segs, num, ok := r.checkValue(); !ok {
				return append(segs, path{index: i}), num, false
			}
		}
	case 't', 'f', 'n':
		r.token()
	case 0:
	default:
		if num := r.token(); !numberFits(num) {
			return nil, num, false
		}
	}
	return nil, nil, true
}

// numberFits reports whether a JSON number token parses as a finite float64. Tokens without
// an exponent and under 300 digits always do; underflow (1e-400) rounds to 0 as in
// encoding/json.
func numberFits(num []byte) bool {
	if len(num) < 300 && !bytes.ContainsAny(num, "eE") {
		return true
	}
	_, err := strconv.ParseFloat(string(num), 64)
	return err == nil
}

// optStr reads a string or null (nil).
func (r *reader) optStr(p *path) (*string, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '"':
		s := r.str()
		return &s, nil
	default:
		return nil, errType(p, "a string", c)
	}
}

// strOrNull reads a string or null ("").
func (r *reader) strOrNull(p *path) (string, *Error) {
	s, err := r.optStr(p)
	if s == nil {
		return "", err
	}
	return *s, nil
}

// optBool reads a boolean or null (nil).
func (r *reader) optBool(p *path) (*bool, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case 't', 'f':
		b := c == 't'
		r.token()
		return &b, nil
	default:
		return nil, errType(p, "a boolean", c)
	}
}

// optFloat reads a number or null (nil).
func (r *reader) optFloat(p *path) (*float64, *Error) {
	c := r.peek()
	if c == 'n' {
		r.token()
		return nil, nil
	}
	if c != '-' && (c < '0' || c > '9') {
		return nil, errType(p, "a number", c)
	}
	num := r.token()
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return nil, errRange(p, num)
	}
	return &f, nil
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

// optInt reads an integer ≥ min or null (nil). Integral numbers in other notations (1e3, 5.0)
// are accepted; fractions, values below min and values beyond ±2^53 are invalid_type.
func (r *reader) optInt(p *path, min int) (*int, *Error) {
	c := r.peek()
	if c == 'n' {
		r.token()
		return nil, nil
	}
	if c != '-' && (c < '0' || c > '9') {
		return nil, errType(p, "an integer", c)
	}
	num := r.token()
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(num), 64)
		switch {
		case ferr != nil || math.Abs(f) > maxExactInt:
			return nil, errRange(p, num)
		case f != math.Trunc(f):
			param := p.String()
			return nil, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
				Message: fmt.Sprintf("Invalid type for '%s': expected an integer, but got a decimal number (%s).", param, clip(string(num)))}
		}
		n = int64(f)
	}
	if n > maxExactInt || n < -maxExactInt {
		return nil, errRange(p, num)
	}
	if n < int64(min) {
		param := p.String()
		return nil, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
			Message: fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= %d, but got %d instead.", param, min, n)}
	}
	v := int(n)
	return &v, nil
}

// path is a parameter path built lazily on the stack while decoding ("input[2].content[0]");
// String renders it only when an error needs it.
type path struct {
	parent *path
	key    []byte // member name when index < 0
	index  int    // array index, or -1 for an object member
}

// String renders the path, e.g. "input[2].content[0].text"; the root (nil) is "".
func (p *path) String() string {
	if p == nil {
		return ""
	}
	return string(p.appendTo(nil))
}

func (p *path) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	if p.parent != nil {
		b = p.parent.appendTo(b)
	}
	if p.index >= 0 {
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.index), 10)
		return append(b, ']')
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	return append(b, p.key...)
}

// child returns the path of member key below p (for error paths built after the walk).
func child(p *path, key string) *path {
	return &path{parent: p, key: []byte(key), index: -1}
}

// kindName names the JSON kind starting with byte c, for error messages.
func kindName(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func errMissing(p *path) *Error {
	param := p.String()
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeMissingRequiredParameter, Param: param,
		Message: fmt.Sprintf("Missing required parameter: '%s'.", param)}
}

func errType(p *path, want string, got byte) *Error {
	param := p.String()
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
		Message: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s.", param, want, kindName(got))}
}

func errRange(p *path, num []byte) *Error { return errRangeParam(p.String(), num) }

func errRangeParam(param string, num []byte) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
		Message: fmt.Sprintf("Invalid type for '%s': the number %s is out of range.", param, clip(string(num)))}
}

func errValue(p *path, val string, supported []string) *Error {
	var b strings.Builder
	for i, s := range supported {
		switch {
		case i == 0:
		case i == len(supported)-1 && len(supported) == 2:
			b.WriteString(" and ")
		case i == len(supported)-1:
			b.WriteString(", and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: p.String(),
		Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", clip(val), b.String())}
}

// compactCopy returns a compacted copy of the JSON value b (valid JSON). Invalid UTF-8 (which
// valid JSON can hold only inside strings) is replaced with U+FFFD, so the copy can be echoed
// as valid UTF-8; member order and duplicates are kept.
func compactCopy(b []byte) json.RawMessage {
	if !utf8.Valid(b) {
		b = appendUTF8(make([]byte, 0, len(b)+8), b)
	}
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}
