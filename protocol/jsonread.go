package protocol

// The protocol package reads JSON with github.com/go-json-experiment/json/jsontext (the basis of
// encoding/json/v2) rather than encoding/json.Unmarshal:
//
//   - Strictness with param paths. Every type error names the offending value the way OpenAI
//     does ("input[3].content[0].text", "tools[1].parameters"); the path comes from the
//     decoder's stack (Decoder.StackPointer). Numbers that do not fit a float64 are rejected
//     even in ignored members, invalid UTF-8 is rejected, repeated top-level members are
//     rejected, and a "type" member selects the shape of a union before its other members are
//     read. Unmarshal's type errors carry a dotted field path without array indices, and unions
//     (string or array, objects keyed by "type") need a second pass over json.RawMessage.
//   - No reflection and no intermediate tree: the decoders below walk the tokens, copy only the
//     strings and raw values they keep, and compute a path only for an error.
//
// Repeated members below the top level are allowed by the tokenizer (AllowDuplicateNames):
// every occurrence is checked and the last one wins, as in encoding/json, and the top-level
// readers reject repeats themselves with their own error (keySet).
//
// Measured by BenchmarkDecodeCreate2000 (a create of 2,000 items, 464 KB) and
// BenchmarkDecodeCreateTypical (4 tools and 20 items, 3.3 KB, against encoding/json.Unmarshal
// into an equivalent struct that checks only JSON types):
//
//	go test -run x -bench DecodeCreate -benchmem ./protocol/
//
// On the shared 2-core machine, against the hand-written reader it replaced: DecodeCreate2000
// 8,473 allocs/op (was 14,071) and 1.91 MB/op (was 2.25 MB/op); time within the machine's
// noise (best runs 7.7 ms against 6.4 ms; thread CPU time 3.9-4.8 ms against 4.0-6.2 ms).
// The bounds of CreateBounds are checked in the same walk (boundfold.go); the second walk of
// checkBounds that did it before took about a quarter of the time.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// dec reads one JSON text. Its tokenizer validates as it goes (syntax, UTF-8, nesting depth);
// a syntax error leaves the tokenizer stuck where it failed, so that every later read fails
// too and the text cannot end cleanly (end). The readers therefore only turn what they read into
// *Errors: decodeText checks a text that failed anywhere as a whole (checkText), so that an
// invalid text is always reported as invalid_json however far the readers got.
type dec struct {
	d      jsontext.Decoder
	buf    bytes.Buffer // holds data; the tokenizer reads it without a copy
	data   []byte       // the text; values returned by the tokenizer alias it
	prefix string       // param of this text inside an enclosing one ("input[3]"), or ""
	noun   string       // what the text is, for error messages: "frame" or "request body"
	bs     *boundState  // a create's bound checks (boundfold.go), or nil: none
	own    boundState   // what bs points to in the decoder that began the checks
}

var decPool = sync.Pool{New: func() any { return new(dec) }}

// decOptions lets the tokenizer accept repeated member names (the readers judge them) and
// invalid UTF-8 (a frame is checked as a whole first; strings are decoded as encoding/json
// decodes them, with U+FFFD for invalid UTF-8 and unpaired surrogates).
var decOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// newDec returns a pooled decoder of data; prefix is the param of data inside an enclosing
// text. The caller releases it.
func newDec(data []byte, prefix, noun string) *dec {
	d := decPool.Get().(*dec)
	d.data, d.prefix, d.noun, d.bs = data, prefix, noun, nil
	d.buf = *bytes.NewBuffer(data)
	d.d.Reset(&d.buf, decOptions...)
	return d
}

// release returns d to the pool without a reference to its text.
func (d *dec) release() {
	d.data, d.buf, d.bs, d.own = nil, bytes.Buffer{}, nil, boundState{}
	d.d.Reset(&d.buf)
	decPool.Put(d)
}

// decodeText reads data with fn and checks that nothing follows the value fn read. When
// either fails it checks data as a whole: an invalid text is reported as invalid_json
// (checkText), else fn's error stands. object requires the text to be a JSON object.
func decodeText(data []byte, noun string, object bool, fn func(d *dec) *Error) *Error {
	if noun != "" && !utf8.Valid(data) {
		return checkText(data, noun, object)
	}
	d := newDec(data, "", noun)
	err := fn(d)
	if err == nil {
		if _, end := d.d.ReadToken(); end != io.EOF {
			err = errSyntax
		}
	}
	d.release()
	if err != nil {
		if bad := checkText(data, noun, object); bad != nil {
			return bad
		}
	}
	if err == errSyntax {
		c := *err
		return &c
	}
	return err
}

// setUnlessInvalid stores v, decoded by an UnmarshalJSON method, in dst unless the text was
// not JSON (dst is then left as it was), and returns err as an error (nil for no error).
func setUnlessInvalid[T any](dst *T, v T, err *Error) error {
	if err == nil || err.Code != CodeInvalidJSON {
		*dst = v
	}
	if err != nil {
		return err
	}
	return nil
}

// errSyntax is what a reader returns when the tokenizer fails; decodeText replaces it with the
// invalid_json error that names the problem.
var errSyntax = &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON, Message: "The value is not valid JSON."}

// checkText returns the invalid_json error for data (noun names it: "frame", "request body",
// or "" for a value), or nil when data is one valid JSON value (an object when object is set).
// Invalid UTF-8 is reported first, then syntax with encoding/json's wording.
func checkText(data []byte, noun string, object bool) *Error {
	bad := func(msg string) *Error {
		return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON, Message: msg}
	}
	if noun == "" {
		if !validJSON(data) {
			return bad(errSyntax.Message)
		}
		return nil
	}
	if !utf8.Valid(data) {
		rfc := "RFC 8259"
		if noun == "frame" {
			rfc += ", RFC 6455 text frames"
		}
		return bad("The " + noun + " is not valid UTF-8: JSON text must be UTF-8 (" + rfc + ").")
	}
	if !validJSON(data) {
		var v json.RawMessage
		msg := "invalid JSON"
		if err := json.Unmarshal(data, &v); err != nil {
			msg = err.Error()
		}
		return bad("The " + noun + " is not valid JSON: " + msg + ".")
	}
	if k := jsontext.Value(bytes.TrimLeft(data, " \t\r\n")).Kind(); object && k != '{' {
		return bad("The " + noun + " is not valid JSON: expected an object, but got " + kindName(k) + ".")
	}
	return nil
}

// validJSON reports whether data is exactly one JSON value, with json.Valid's verdict (a fuzz
// test compares them): nested at most 10,000 levels deep, repeated member names allowed, the
// UTF-8 of strings not checked.
func validJSON(data []byte) bool { return jsontext.Value(data).IsValid(decOptions...) }

// kind returns the kind of the next token: '{', '[', '"', '0' (a number), 'n', 't', 'f', the
// end of an object or array ('}', ']'), or 0 at the end of the text or a syntax error.
func (d *dec) kind() jsontext.Kind { return d.d.PeekKind() }

// value reads the next scalar (string, number or literal) or a whole object or array, as the
// raw bytes of data. A syntax error gives nil.
func (d *dec) value() []byte {
	v, err := d.d.ReadValue()
	if err != nil {
		return nil
	}
	return v
}

// open reads the '{' or '[' the caller has peeked.
func (d *dec) open() { _, _ = d.d.ReadToken() }

// strBytes reads a string token and returns its content (aliasing data unless it holds
// escapes), or nil after a syntax error.
func (d *dec) strBytes() []byte { return unquote(d.value()) }

// unquote returns the content of the string token v (aliasing v unless it holds escapes), or
// nil for nil.
func unquote(v []byte) []byte {
	if v == nil {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return v[1 : len(v)-1]
	}
	s, _ := jsontext.AppendUnquote(make([]byte, 0, len(v)), v)
	if s == nil {
		return []byte{}
	}
	return s
}

// str reads a string token as a new string.
func (d *dec) str() string { return bigString(d.strBytes()) }

// null reads a null if one is next and reports whether it did.
func (d *dec) null() bool {
	if d.kind() == 'n' {
		d.value()
		return true
	}
	return false
}

// memberFunc reads one member of an object for dec.object: key is the member's unescaped
// name and the decoder is at its value. It may leave the value unread; object then skips it,
// checking its numbers.
type memberFunc func(key []byte) *Error

// object reads the object that is the next value member by member with fn and returns fn's
// first error. A value that is not an object is invalid_type ("expected an object").
func (d *dec) object(fn memberFunc) *Error {
	if k := d.kind(); k != '{' {
		return d.errType("an object", k)
	}
	d.open()
	return d.members(fn)
}

// members reads the members of the object whose '{' has been read, and its '}'.
func (d *dec) members(fn memberFunc) *Error {
	_, err := d.membersIn(nil, "", fn)
	return err
}

// membersIn is members for an object at node n of boundTree, of type typ: the values fn leaves
// unread are walked against the nodes below n (dec.walk). fn may be nil. It returns the number
// of members read.
func (d *dec) membersIn(n *boundNode, typ string, fn memberFunc) (int, *Error) {
	depth, count := d.d.StackDepth(), 0
	for d.kind() == '"' {
		key := d.strBytes()
		if key == nil {
			return count, errSyntax
		}
		count++
		if fn != nil {
			if err := fn(key); err != nil {
				return count, err
			}
		}
		if _, i := d.d.StackIndex(depth); i%2 == 1 { // the name is read, its value not
			if err := d.walk(n.child(string(key)), typ); err != nil {
				return count, err
			}
		}
	}
	if _, err := d.d.ReadToken(); err != nil {
		return count, errSyntax
	}
	return count, nil
}

// optObject is object for a value that may be null: null is read and reported as found=false.
func (d *dec) optObject(fn memberFunc) (found bool, err *Error) {
	if d.null() {
		return false, nil
	}
	return true, d.object(fn)
}

// array reads the array that is the next value (its '[' peeked by the caller), calling fn at
// each element.
func (d *dec) array(fn func() *Error) *Error {
	d.open()
	for d.kind() != ']' {
		at := d.d.InputOffset()
		if err := fn(); err != nil {
			return err
		}
		if d.d.InputOffset() == at { // the element could not be read
			return errSyntax
		}
	}
	if _, err := d.d.ReadToken(); err != nil {
		return errSyntax
	}
	return nil
}

// typed is an object whose shape its first string "type" member chooses (items, content parts,
// tools, tool_choice), opened by dec.typed.
type typed struct {
	*dec       // reads the object's members, up to and with its '}'
	sub   bool // dec is a decoder of the object alone, to be released (done)
	start int  // offset of the object's '{' in dec.data
	typ   []byte
	found bool // the object has a "type" member that is a string
	role  bool // a "role" member comes before the type (anywhere when there is none)
}

// typed opens the object that is the next value (the caller has peeked its '{'). A null
// "type" is passed over; a "type" of another kind is invalid_type. When "type" is the first
// member, as clients send it, t reads on with d, past the type; otherwise the object is read
// whole and t reads it with a decoder of its own, from its first member.
func (d *dec) typed() (t typed, err *Error) {
	t.start = int(d.d.InputOffset()) + valueStart(d.d.UnreadBuffer())
	if typeFirst(d.data[t.start:]) {
		d.open()
		d.value()
		t.dec, t.typ, t.found = d, d.strBytes(), true
		return t, nil
	}
	v, o := d.sub()
	o.open()
	for o.kind() == '"' && !t.found {
		switch string(o.strBytes()) {
		case "type":
			switch k := o.kind(); k {
			case '"':
				t.typ, t.found = o.strBytes(), true
				continue
			case 'n':
			default:
				err = o.errType("a string", k)
				o.release()
				return t, err
			}
		case "role":
			t.role = true
		}
		_ = o.d.SkipValue()
	}
	o.buf = *bytes.NewBuffer(v) // the scan spent o.buf: read v again from the start
	o.d.Reset(&o.buf, decOptions...)
	o.open()
	t.dec, t.sub, t.start = o, true, 0
	return t, nil
}

// sub reads the next value whole and returns it (nil after a syntax error) and a decoder of it
// alone, whose paths continue d's. The caller releases the decoder.
func (d *dec) sub() ([]byte, *dec) {
	v := d.value()
	o := newDec(v, d.param(), d.noun)
	o.bs = d.bs
	return v, o
}

// raw returns a compacted copy of the object t has read to its end.
func (t *typed) raw() json.RawMessage {
	return compactCopy(t.data[t.start:t.d.InputOffset()])
}

// done releases t's own decoder, if it has one.
func (t *typed) done() {
	if t.sub {
		t.dec.release()
	}
}

// valueStart returns the offset in unread (what follows the last token read) of the next value:
// past white space and one ',' or ':'.
func valueStart(unread []byte) int {
	i := 0
	for i < len(unread) {
		switch unread[i] {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
		default:
			return i
		}
	}
	return i
}

// typeFirst reports whether b starts with an object whose first member is "type" with a
// string value: `{"type":"`, white space allowed between the tokens.
func typeFirst(b []byte) bool {
	for _, want := range [...]string{"{", `"type"`, ":", `"`} {
		i := 0
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
		if !bytes.HasPrefix(b[i:], []byte(want)) {
			return false
		}
		b = b[i+len(want):]
	}
	return true
}

// skip moves past the next value, checking that every number in it fits a float64
// (encoding/json cannot decode 1e400); otherwise it returns invalid_type naming the number.
func (d *dec) skip() *Error {
	depth := d.d.StackDepth()
	for {
		switch d.kind() {
		case '{', '[', '}', ']':
			if _, err := d.d.ReadToken(); err != nil {
				return errSyntax
			}
		case '0':
			switch num := d.value(); {
			case num == nil:
				return errSyntax
			case !numberFits(num):
				return d.errRange(num)
			}
		default:
			if d.value() == nil {
				return errSyntax
			}
		}
		if d.d.StackDepth() == depth {
			return nil
		}
	}
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
func (d *dec) optStr() (*string, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '"':
		s := d.str()
		return &s, nil
	default:
		return nil, d.errType("a string", k)
	}
}

// strOrNull reads a string or null ("").
func (d *dec) strOrNull() (string, *Error) {
	s, err := d.optStr()
	if s == nil {
		return "", err
	}
	return *s, nil
}

// optBool reads a boolean or null (nil).
func (d *dec) optBool() (*bool, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case 't', 'f':
		d.value()
		return new(k == 't'), nil
	default:
		return nil, d.errType("a boolean", k)
	}
}

// optFloat reads a number or null (nil).
func (d *dec) optFloat() (*float64, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '0':
		num := d.value()
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return nil, d.errRange(num)
		}
		return &f, nil
	default:
		return nil, d.errType("a number", k)
	}
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

// optInt reads an integer or null (nil). Integral numbers in other notations (1e3, 5.0) are
// accepted; fractions and values beyond ±2^53 are invalid_type.
func (d *dec) optInt() (*int, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '0':
	default:
		return nil, d.errType("an integer", k)
	}
	num := d.value()
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(num), 64)
		switch {
		case ferr != nil || math.Abs(f) > maxExactInt:
			return nil, d.errRange(num)
		case f != math.Trunc(f):
			param := d.param()
			return nil, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
				Message: fmt.Sprintf("Invalid type for '%s': expected an integer, but got a decimal number (%s).", param, clip(string(num)))}
		}
		n = int64(f)
	}
	if n > maxExactInt || n < -maxExactInt {
		return nil, d.errRange(num)
	}
	return new(int(n)), nil
}

// param renders the path of the value read last ("input[2].content[0].text", "" for the
// root): the decoder's stack pointer in the API's form, after d's prefix.
func (d *dec) param() string { return d.paramUp(0) }

// parent renders the path of the object or array holding the value read last.
func (d *dec) parent() string { return d.paramUp(1) }

// paramUp renders param without its last up levels.
func (d *dec) paramUp(up int) string {
	b := []byte(d.prefix)
	ptr := d.d.StackPointer()
	n := strings.Count(string(ptr), "/") - up
	i := 1
	for tok := range ptr.Tokens() {
		if i > n {
			break
		}
		if k, _ := d.d.StackIndex(i); k == '[' {
			b = append(append(append(b, '['), tok...), ']')
		} else {
			b = joinParam(b, tok)
		}
		i++
	}
	return string(b)
}

// joinParam appends the member name to the path b.
func joinParam(b []byte, name string) []byte {
	if len(b) > 0 {
		b = append(b, '.')
	}
	return append(b, name...)
}

// kindName names a JSON kind for error messages.
func kindName(k jsontext.Kind) string {
	switch k {
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

// clip shortens s for an error message: Clip at 64 bytes.
func clip(s string) string { return Clip(s, 64) }

// Clip returns s cut to at most n bytes at a character boundary, followed by "…" when it was
// cut: how a value quoted in an error message (a member name, a model, a header, an upstream's
// text) is kept short without splitting a character.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// errMissing is missing_required_parameter for param.
func errMissing(param string) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeMissingRequiredParameter, Param: param,
		Message: fmt.Sprintf("Missing required parameter: '%s'.", param)}
}

// missing is missing_required_parameter for member name of the object read last.
func (d *dec) missing(name string) *Error {
	return errMissing(string(joinParam([]byte(d.param()), name)))
}

// errType reads the next value, of kind got, and returns invalid_type for it: expected want.
func (d *dec) errType(want string, got jsontext.Kind) *Error {
	_ = d.d.SkipValue()
	param := d.param()
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
		Message: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s.", param, want, kindName(got))}
}

// errRange is invalid_type for the number num, read last, that does not fit.
func (d *dec) errRange(num []byte) *Error {
	param := d.param()
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: param,
		Message: fmt.Sprintf("Invalid type for '%s': the number %s is out of range.", param, clip(string(num)))}
}

// errValue is invalid_value for val at param, listing the supported values.
func errValue(param, val string, supported []string) *Error {
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
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: param,
		Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", clip(val), b.String())}
}

// compactCopy returns a compacted copy of the JSON value b (valid JSON); member order and
// repeated members are kept, strings and numbers are copied as written, except that invalid
// UTF-8 is replaced with U+FFFD so that the copy can be echoed as valid UTF-8.
func compactCopy(b []byte) json.RawMessage {
	var v jsontext.Value
	if utf8.Valid(b) {
		v = appendYieldingBytes(nil, b)
	} else {
		v = appendUTF8(make([]byte, 0, len(b)+8), b)
	}
	if err := v.Compact(); err != nil {
		return json.RawMessage(bytes.Clone(b))
	}
	return json.RawMessage(v)
}

// appendUTF8 appends b with each invalid UTF-8 byte replaced by U+FFFD.
func appendUTF8(dst, b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}
