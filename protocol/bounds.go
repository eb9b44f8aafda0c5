package protocol

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// BoundKind says what a Bound constrains and which error code a violation gets.
type BoundKind int

const (
	// BoundInteger: a number in [Min, Max] — integer_below_min_value / integer_above_max_value.
	BoundInteger BoundKind = iota
	// BoundDecimal: a number in [Min, Max] — decimal_below_min_value / decimal_above_max_value.
	BoundDecimal
	// BoundEnum: a string in Enum — invalid_value.
	BoundEnum
	// BoundLength: a string of Min…Max characters (Unicode code points) —
	// string_below_min_length / string_above_max_length.
	BoundLength
	// BoundItems: an array of Min…Max elements — array_below_min_length / array_above_max_length.
	BoundItems
	// BoundProperties: an object of at most Max members — object_above_max_properties.
	BoundProperties
	// BoundPattern: a string matching Pattern (RE2) — invalid_value.
	BoundPattern
)

// Bound is one row of CreateBounds: a constraint on the values at Param of a create request.
// Param is a path pattern: member names joined by ".", "[]" for every element of an array, "*"
// for every member of an object ("input[].content[].text", "metadata.*"). Min and Max apply
// when HasMin / HasMax are set. OnlyType limits the row to objects whose "type" member is that
// string (tools[].name of function tools only). Code, when set, replaces the kind's code.
// Source says where the bound comes from: "schema" (the Open Responses schema), "openai"
// (OpenAI's documented range, in the schema's description only) or "tether".
type Bound struct {
	Param          string
	Kind           BoundKind
	Min, Max       float64
	HasMin, HasMax bool
	Enum           []string
	Pattern        string
	OnlyType       string
	Code           string
	Source         string
}

// maxText is the schema's maxLength of text inputs (10 MiB of characters).
const maxText = 10485760

func between(param string, kind BoundKind, lo, hi float64, src string) Bound {
	return Bound{Param: param, Kind: kind, Min: lo, Max: hi, HasMin: true, HasMax: true, Source: src}
}

func atLeast(param string, kind BoundKind, lo float64) Bound {
	return Bound{Param: param, Kind: kind, Min: lo, HasMin: true, Source: "schema"}
}

func atMost(param string, kind BoundKind, hi float64) Bound {
	return Bound{Param: param, Kind: kind, Max: hi, HasMax: true, Source: "schema"}
}

func oneOf(param string, values ...string) Bound {
	return Bound{Param: param, Kind: BoundEnum, Enum: values, Source: "schema"}
}

// ReasoningEfforts are the accepted reasoning.effort values: the schema's enum plus "minimal",
// which OpenAI accepts (gpt-5).
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// CreateBounds is the table of ranges, enums and length limits every create request is held
// to (HTTP body and response.create on both WebSocket shapes), checked while decoding: a
// decode error anywhere wins, then the first violation in document order (boundfold.go).
// It mirrors every numeric bound, multi-valued enum, length and count limit and pattern of the
// Open Responses schema's CreateResponseBody (a test walks the schema and fails on a missing
// row), plus OpenAI's documented ranges of temperature, top_p and the penalties.
// Single-valued enums of "type" and "role" discriminate union members and are not bounds.
var CreateBounds = []Bound{
	atLeast("max_output_tokens", BoundInteger, 16),
	atLeast("max_tool_calls", BoundInteger, 1),
	between("top_logprobs", BoundInteger, 0, 20, "schema"),
	between("temperature", BoundDecimal, 0, 2, "openai"),
	between("top_p", BoundDecimal, 0, 1, "openai"),
	between("presence_penalty", BoundDecimal, -2, 2, "openai"),
	between("frequency_penalty", BoundDecimal, -2, 2, "openai"),
	{Param: "reasoning.effort", Kind: BoundEnum, Enum: ReasoningEfforts, Source: "schema"},
	oneOf("reasoning.summary", "concise", "detailed", "auto"),
	oneOf("text.verbosity", "low", "medium", "high"),
	oneOf("text.format.type", "text", "json_schema", "json_object"),
	{Param: "text.format.name", Kind: BoundLength, Min: 1, Max: 64, HasMin: true, HasMax: true, OnlyType: "json_schema", Source: "schema"},
	{Param: "text.format.name", Kind: BoundPattern, Pattern: namePattern, OnlyType: "json_schema", Source: "schema"},
	oneOf("truncation", "auto", "disabled"),
	oneOf("service_tier", "auto", "default", "flex", "priority"),
	oneOf("include[]", "reasoning.encrypted_content", "message.output_text.logprobs"),
	atMost("safety_identifier", BoundLength, 64),
	atMost("prompt_cache_key", BoundLength, 64),
	{Param: "metadata", Kind: BoundProperties, Max: MaxMetadataKeys, HasMax: true, Code: CodeInvalidValue, Source: "schema"},
	{Param: "metadata.*", Kind: BoundLength, Max: MaxMetadataValueLen, HasMax: true, Code: CodeInvalidValue, Source: "schema"},
	oneOf("tool_choice", "none", "auto", "required"),
	oneOf("tool_choice.mode", "none", "auto", "required"),
	between("tool_choice.tools", BoundItems, 1, 128, "schema"),
	{Param: "tools[].name", Kind: BoundLength, Min: 1, Max: 64, HasMin: true, HasMax: true, OnlyType: ToolFunction, Source: "schema"},
	{Param: "tools[].name", Kind: BoundPattern, Pattern: namePattern, OnlyType: ToolFunction, Source: "schema"},
	atMost("input", BoundLength, maxText),
	oneOf("input[].role", "user", "assistant", "system", "developer"),
	oneOf("input[].status", "in_progress", "completed", "incomplete"),
	oneOf("input[].phase", "commentary", "final_answer"),
	atMost("input[].content", BoundLength, maxText),
	atMost("input[].content[].text", BoundLength, maxText),
	atMost("input[].content[].refusal", BoundLength, maxText),
	atMost("input[].content[].image_url", BoundLength, 20971520),
	atMost("input[].content[].file_data", BoundLength, 33554432),
	oneOf("input[].content[].detail", "low", "high", "auto"),
	atLeast("input[].content[].annotations[].start_index", BoundInteger, 0),
	atLeast("input[].content[].annotations[].end_index", BoundInteger, 0),
	atMost("input[].summary[].text", BoundLength, maxText),
	atMost("input[].encrypted_content", BoundLength, maxText),
	between("input[].call_id", BoundLength, 1, 64, "schema"),
	{Param: "input[].name", Kind: BoundLength, Min: 1, Max: 64, HasMin: true, HasMax: true, OnlyType: ItemFunctionCall, Source: "schema"},
	{Param: "input[].name", Kind: BoundPattern, Pattern: namePattern, OnlyType: ItemFunctionCall, Source: "schema"},
	atMost("input[].output", BoundLength, maxText),
	atMost("input[].output[].text", BoundLength, maxText),
	atMost("input[].output[].image_url", BoundLength, 20971520),
	atMost("input[].output[].file_data", BoundLength, 33554432),
	oneOf("input[].output[].detail", "low", "high", "auto"),
}

// ErrorCode returns the code a violation of b gets; below tells a lower bound from an upper one.
func (b *Bound) ErrorCode(below bool) string {
	if b.Code != "" {
		return b.Code
	}
	switch b.Kind {
	case BoundInteger:
		return pick(below, CodeIntegerBelowMin, CodeIntegerAboveMax)
	case BoundDecimal:
		return pick(below, CodeDecimalBelowMin, CodeDecimalAboveMax)
	case BoundLength:
		return pick(below, CodeStringBelowMinLength, CodeStringAboveMaxLength)
	case BoundItems:
		return pick(below, CodeArrayBelowMinLength, CodeArrayAboveMaxLength)
	case BoundProperties:
		return CodeObjectAboveMaxProperties
	}
	return CodeInvalidValue
}

func pick(below bool, lo, hi string) string {
	if below {
		return lo
	}
	return hi
}

// boundNode is one level of the compiled CreateBounds: the rows that apply at a path and the
// nodes below it.
type boundNode struct {
	rows     []*Bound
	children map[string]*boundNode // member name, "[]" or "*"
	regexps  map[*Bound]*regexp.Regexp
	// typed: a row at or below n depends on the "type" of an object (OnlyType), or n checks
	// a "type" member: an object at n is read for its type first (typed)
	typed bool
}

var boundTree = compileBounds(CreateBounds)

func compileBounds(rows []Bound) *boundNode {
	root := &boundNode{}
	for i := range rows {
		b := &rows[i]
		n := root
		for _, seg := range splitParam(b.Param) {
			if n.children == nil {
				n.children = map[string]*boundNode{}
			}
			c := n.children[seg]
			if c == nil {
				c = &boundNode{}
				n.children[seg] = c
			}
			n = c
		}
		n.rows = append(n.rows, b)
		if b.OnlyType != "" {
			markTyped(root, b.Param)
		}
		if b.Kind == BoundPattern {
			if n.regexps == nil {
				n.regexps = map[*Bound]*regexp.Regexp{}
			}
			n.regexps[b] = regexp.MustCompile(b.Pattern)
		}
		if segs := splitParam(b.Param); segs[len(segs)-1] == "type" {
			markTyped(root, strings.TrimSuffix(strings.TrimSuffix(b.Param, "type"), "."))
		}
	}
	return root
}

// markTyped marks the nodes on the path to the row at param, whose objects must be read for
// their type; a "type" member's row marks its object's node too.
func markTyped(root *boundNode, param string) {
	n := root
	n.typed = true
	for _, seg := range splitParam(param) {
		n = n.children[seg]
		n.typed = true
	}
}

// splitParam splits "input[].content[].text" into input, [], content, [], text.
func splitParam(param string) []string {
	var segs []string
	for _, part := range strings.Split(param, ".") {
		name, arrays, _ := strings.Cut(part, "[]")
		if name != "" {
			segs = append(segs, name)
		}
		if part != name {
			segs = append(segs, "[]")
			for strings.HasPrefix(arrays, "[]") {
				segs = append(segs, "[]")
				arrays = arrays[2:]
			}
		}
	}
	return segs
}

// checkBounds checks the create request data (a valid JSON object) against CreateBounds and
// returns the first violation in document order, in a walk of its own: the reference that the
// checks made while decoding are tested against (FuzzBoundsInDecode).
func checkBounds(data []byte) *Error {
	d := newDec(data, "", "")
	defer d.release()
	return d.bounds(boundTree, "")
}

// bounds checks the next value against node n (its rows and the nodes below it) and moves
// past it. typ is the "type" of the object holding the value.
func (d *dec) bounds(n *boundNode, typ string) *Error {
	switch k := d.kind(); k {
	case '{', '[':
		if err := n.checkComposite(k, d, typ); err != nil {
			return err
		}
	}
	switch d.kind() {
	case '{':
		return d.boundsObject(n)
	case '[':
		return d.boundsArray(n, typ)
	default:
		tok := d.value()
		if tok == nil {
			return errSyntax
		}
		return n.checkToken(tok, d, typ)
	}
}

// boundsObject checks the members of the object that is the next value against the nodes below
// n, with the object's "type", and its count of members against n.
func (d *dec) boundsObject(n *boundNode) *Error {
	if len(n.children) == 0 || !n.typed { // no row below needs the object's type
		d.open()
		return d.boundsMembers(n, 0, "")
	}
	start := d.offset()
	t, err := d.typed()
	if err != nil {
		// A "type" that is neither a string nor null: the readers refuse it where it chooses
		// a shape (items, content parts, tools, tool_choice) and ignore it elsewhere (a request
		// body, text, text.format), so the object is checked as one without a type.
		o := newDec(d.data[start:d.d.InputOffset()], d.param(), d.noun)
		defer o.release()
		o.open()
		return o.boundsMembers(n, 0, "")
	}
	defer t.done()
	own, count := "", 0
	if t.found {
		own = string(t.typ)
	}
	if t.found && !t.sub { // the type was the first member: check it here
		count = 1
		if c := n.children["type"]; c != nil {
			if err := c.checkString(t.typ, t.dec, own); err != nil {
				return err
			}
		}
	}
	return t.boundsMembers(n, count, own)
}

// boundsMembers checks the members of an object whose '{' and first count members have been
// read.
func (d *dec) boundsMembers(n *boundNode, count int, own string) *Error {
	for d.kind() == '"' {
		key := d.strBytes()
		if key == nil {
			return errSyntax
		}
		count++
		c := n.children[string(key)]
		if c == nil {
			c = n.children["*"]
		}
		var err *Error
		if c == nil {
			err = d.skipUnchecked()
		} else {
			err = d.bounds(c, own)
		}
		if err != nil {
			return err
		}
	}
	if _, err := d.d.ReadToken(); err != nil {
		return errSyntax
	}
	return n.checkCount(BoundProperties, count, d)
}

func (d *dec) boundsArray(n *boundNode, typ string) *Error {
	c := n.children["[]"]
	count := 0
	err := d.array(func() *Error {
		count++
		if c == nil {
			return d.skipUnchecked()
		}
		return d.bounds(c, typ)
	})
	if err != nil {
		return err
	}
	return n.checkCount(BoundItems, count, d)
}

// skipUnchecked moves past the next value.
func (d *dec) skipUnchecked() *Error {
	if d.d.SkipValue() != nil {
		return errSyntax
	}
	return nil
}

// lengthOnly reports whether the string token tok certainly meets n's rows without decoding
// it: n has only maximum-length rows and the token's raw length is within the smallest maximum
// (escapes only make the raw text longer than the decoded one).
func (n *boundNode) lengthOnly(tok []byte) bool {
	if len(n.rows) == 0 {
		return true
	}
	limit := -1.0
	for _, b := range n.rows {
		if b.Kind != BoundLength || b.HasMin || !b.HasMax {
			return false
		}
		if limit < 0 || b.Max < limit {
			limit = b.Max
		}
	}
	return float64(len(tok)-2) <= limit
}

// namePattern is the schema's pattern of function and format names.
const namePattern = `^[a-zA-Z0-9_-]+$`

// matchPattern matches s against pattern, without the regexp engine for namePattern.
func matchPattern(pattern string, re *regexp.Regexp, s []byte) bool {
	if pattern != namePattern {
		return re.Match(s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return len(s) > 0
}

func applies(b *Bound, typ string) bool { return b.OnlyType == "" || b.OnlyType == typ }

func (n *boundNode) checkString(s []byte, d *dec, typ string) *Error {
	for _, b := range n.rows {
		if !applies(b, typ) {
			continue
		}
		switch b.Kind {
		case BoundEnum:
			if !inEnum(string(s), b.Enum) {
				return errValue(d.param(), string(s), b.Enum)
			}
		case BoundPattern:
			if !matchPattern(b.Pattern, n.regexps[b], s) {
				param := d.param()
				return &Error{Status: 400, Type: TypeInvalidRequest, Code: b.ErrorCode(false), Param: param,
					Message: fmt.Sprintf("Invalid '%s': string does not match pattern. Expected a string that matches the pattern '%s'.", param, b.Pattern)}
			}
		case BoundLength:
			if err := lengthError(b, utf8.RuneCount(s), d, "string", "a string", "length"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *boundNode) checkCount(kind BoundKind, count int, d *dec) *Error {
	for _, b := range n.rows {
		if b.Kind != kind {
			continue
		}
		noun, what, unit := "array", "an array", "length"
		if kind == BoundProperties {
			noun, what, unit = "object", "an object", "properties"
		}
		if err := lengthError(b, count, d, noun, what, unit); err != nil {
			return err
		}
	}
	return nil
}

func lengthError(b *Bound, n int, d *dec, noun, what, unit string) *Error {
	var rel, lim string
	var limit float64
	switch {
	case b.HasMin && float64(n) < b.Min:
		rel, lim, limit = "too short", "minimum", b.Min
	case b.HasMax && float64(n) > b.Max:
		rel, lim, limit = "too long", "maximum", b.Max
		if unit == "properties" {
			rel = "too many properties"
		}
	default:
		return nil
	}
	return boundError(b.ErrorCode(lim == "minimum"), d.param(), n, int64(limit), noun, rel, lim, what, unit)
}

// boundError is the error of a length or count n beyond its limit, in OpenAI's words.
func boundError(code, param string, n int, limit int64, noun, rel, lim, what, unit string) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: code, Param: param,
		Message: fmt.Sprintf("Invalid '%s': %s %s. Expected %s with %s %s %d, but got %s with %s %d instead.",
			param, noun, rel, what, lim, unit, limit, what, unit, n)}
}

// MaxTextLength is the most characters (Unicode code points) one text of a create may hold:
// an input string, a message's content string or part text, a function_call_output's output
// (the Open Responses schema's maxLength of each, 10 MiB of characters).
const MaxTextLength = maxText

// CheckTextLength returns the error a create's text input over MaxTextLength characters gets,
// string_above_max_length (400) with Param param, when s is over it; else nil. Other shapes
// (Chat Completions messages) hold their texts to the same limit with it.
func CheckTextLength(param, s string) *Error {
	if len(s) <= MaxTextLength { // never more characters than bytes
		return nil
	}
	n := utf8.RuneCountInString(s)
	if n <= MaxTextLength {
		return nil
	}
	return boundError(CodeStringAboveMaxLength, param, n, MaxTextLength, "string", "too long", "maximum", "a string", "length")
}

func (n *boundNode) checkNumber(f float64, d *dec, typ string) *Error {
	for _, b := range n.rows {
		if !applies(b, typ) || (b.Kind != BoundInteger && b.Kind != BoundDecimal) {
			continue
		}
		noun := "integer"
		if b.Kind == BoundDecimal {
			noun = "decimal"
		}
		var rel, op string
		var limit float64
		switch {
		case b.HasMin && f < b.Min:
			rel, op, limit = "below minimum", ">=", b.Min
		case b.HasMax && f > b.Max:
			rel, op, limit = "above maximum", "<=", b.Max
		default:
			continue
		}
		param := d.param()
		return &Error{Status: 400, Type: TypeInvalidRequest, Code: b.ErrorCode(op == ">="), Param: param,
			Message: fmt.Sprintf("Invalid '%s': %s %s value. Expected a value %s %s, but got %s instead.",
				param, noun, rel, op, fmtNum(limit), fmtNum(f))}
	}
	return nil
}

func fmtNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func inEnum(s string, values []string) bool {
	for _, v := range values {
		if s == v {
			return true
		}
	}
	return false
}
