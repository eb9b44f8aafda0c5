package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tetherd/tether/protocol"
)

// schema is the part of a JSON schema the sim reads to synthesise arguments.
type schema struct {
	Type       json.RawMessage    `json:"type"` // "string" or ["string","null"]
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *schema            `json:"items"`
	Enum       []json.RawMessage  `json:"enum"`
	Const      json.RawMessage    `json:"const"`
	AnyOf      []*schema          `json:"anyOf"`
	OneOf      []*schema          `json:"oneOf"`
	AllOf      []*schema          `json:"allOf"`
	Ref        string             `json:"$ref"`
	Defs       map[string]*schema `json:"$defs"`
	Defns      map[string]*schema `json:"definitions"`
	Minimum    *float64           `json:"minimum"`
	Maximum    *float64           `json:"maximum"`
	MinLength  int                `json:"minLength"`
	MinItems   int                `json:"minItems"`

	root *schema // the document's root, for local $refs

	typName  string // typ's answer, once typKnown
	typKnown bool
}

func parseSchema(raw json.RawMessage) *schema {
	var s schema
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return &schema{}
	}
	return &s
}

// typ returns the schema's first non-null type, or "".
func (s *schema) typ() string {
	if !s.typKnown {
		s.typName, s.typKnown = s.parseType(), true
	}
	return s.typName
}

func (s *schema) parseType() string {
	if len(s.Type) == 0 {
		return ""
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(s.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
		if len(many) > 0 {
			return many[0]
		}
	}
	return ""
}

// shellTools are the names of shell-like function tools.
var shellTools = map[string]bool{"exec_command": true, "shell": true, "shell_command": true, "local_shell": true}

// commandProperty returns the required "cmd" or "command" property of a tool, or "".
func commandProperty(s *schema) string {
	for _, r := range s.Required {
		if r == "cmd" || r == "command" {
			return r
		}
	}
	return ""
}

// toolInfo is what the sim reads of a function tool, parsed once per rollout.
type toolInfo struct {
	raw    []byte  // the Parameters it was parsed from
	schema *schema // parsed Parameters
	// shell: the tool is shell-like, named exec_command, shell, shell_command or local_shell,
	// or with a required cmd/command property (cmd names it, "" for a name-only match).
	shell bool
	cmd   string
}

func newToolInfo(t *protocol.Tool) *toolInfo {
	info := &toolInfo{raw: bytes.Clone(t.Parameters), schema: parseSchema(t.Parameters)}
	info.cmd = commandProperty(info.schema)
	info.shell = shellTools[t.Name] || info.cmd != ""
	return info
}

// synthArguments returns the JSON arguments of a call of the tool info describes, at most
// limit bytes (cut reports that the value was cut there): an object holding the schema's
// required properties only, in the order of "required". A shell-like tool's cmd/command gets
// "echo <marker>" (["echo","<marker>"] when array-typed); other values are synthesised: const
// or the first enum value, string → word, number/integer → 1, boolean → true, array → [],
// object → its required properties, recursively.
func synthArguments(info *toolInfo, marker, word string, limit int) (args string, cut bool) {
	s, cmd := info.schema, info.cmd
	w := newSynth(limit)
	b := &w.b
	b.WriteByte('{')
	for i, name := range s.Required {
		if w.full() {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, name)
		b.WriteByte(':')
		prop := s.Properties[name]
		if prop == nil {
			prop = &schema{}
		}
		prop.root = s
		if name == cmd {
			if prop.typ() == "array" {
				b.WriteString(`["echo",`)
				writeString(b, marker)
				b.WriteByte(']')
			} else {
				writeString(b, "echo "+marker)
			}
			continue
		}
		writeValue(w, prop, word, 0)
	}
	b.WriteByte('}')
	return w.result()
}

// synth is a synthesised value being written: at most limit bytes, so the work is bounded by
// what the step may stream, however large the schema asks the value to be (minItems,
// minLength, nesting).
type synth struct {
	b     bytes.Buffer
	limit int
}

func newSynth(limit int) *synth { return &synth{limit: limit} }

// full reports that the value has reached its limit: writers stop.
func (w *synth) full() bool { return w.b.Len() >= w.limit }

// room is how many bytes may still be written.
func (w *synth) room() int { return max(w.limit-w.b.Len(), 0) }

// result returns the value, cut to the limit, and whether it was cut.
func (w *synth) result() (string, bool) {
	if w.b.Len() > w.limit {
		return string(w.b.Bytes()[:w.limit]), true
	}
	return w.b.String(), w.full()
}

const maxSchemaDepth = 8

// maxSynthDepth bounds writeValue's recursion, which anyOf, oneOf and allOf deepen without
// writing an array or object ($refs can make them a cycle).
const maxSynthDepth = 4 * maxSchemaDepth

// resolve follows a local $ref ("#", "#/$defs/X", "#/definitions/X") against root.
func (s *schema) resolve(root *schema) *schema {
	for i := 0; s.Ref != "" && i < maxSchemaDepth; i++ {
		var next *schema
		switch ref := s.Ref; {
		case ref == "#":
			next = root
		case strings.HasPrefix(ref, "#/$defs/"):
			next = root.Defs[strings.TrimPrefix(ref, "#/$defs/")]
		case strings.HasPrefix(ref, "#/definitions/"):
			next = root.Defns[strings.TrimPrefix(ref, "#/definitions/")]
		}
		if next == nil {
			return &schema{}
		}
		s = next
	}
	return s
}

// writeValue writes a value valid for s: const or the first enum value; anyOf/oneOf take the
// first non-null option, allOf its first member; string → word (repeated up to minLength),
// number/integer → 1 moved into [minimum, maximum], boolean → true, array → minItems
// elements, object → its required properties. Local $refs are followed.
func writeValue(w *synth, s *schema, word string, depth int) {
	b := &w.b
	if w.full() {
		return
	}
	if depth > maxSynthDepth { // a cycle of $refs through anyOf/oneOf/allOf
		b.WriteString("null")
		return
	}
	root := s.root
	if root == nil {
		root = s
	}
	s = s.resolve(root)
	sub := func(x *schema) *schema {
		if x == nil {
			return &schema{root: root}
		}
		x.root = root
		return x
	}
	switch {
	case len(s.Const) > 0:
		b.Write(compact(s.Const))
		return
	case len(s.Enum) > 0:
		b.Write(compact(s.Enum[0]))
		return
	case len(s.AnyOf) > 0:
		writeValue(w, sub(firstNonNull(s.AnyOf)), word, depth+1)
		return
	case len(s.OneOf) > 0:
		writeValue(w, sub(firstNonNull(s.OneOf)), word, depth+1)
		return
	case len(s.AllOf) > 0 && s.typ() == "" && s.Properties == nil:
		writeValue(w, sub(s.AllOf[0]), word, depth+1)
		return
	}
	typ := s.typ()
	if typ == "" && s.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "number", "integer":
		b.WriteString(strconv.FormatFloat(s.number(typ == "integer"), 'f', -1, 64))
	case "boolean":
		b.WriteString("true")
	case "array":
		b.WriteByte('[')
		for i := 0; i < s.MinItems && depth < maxSchemaDepth && !w.full(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(w, sub(s.Items), word, depth+1)
		}
		b.WriteByte(']')
	case "null":
		b.WriteString("null")
	case "object":
		b.WriteByte('{')
		if depth < maxSchemaDepth {
			for i, name := range s.Required {
				if w.full() {
					break
				}
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(b, name)
				b.WriteByte(':')
				writeValue(w, sub(s.Properties[name]), word, depth+1)
			}
		}
		b.WriteByte('}')
	default: // string, or no type
		writeString(b, repeatWord(word, s.MinLength, w.room()))
	}
}

// number returns 1 moved into [minimum, maximum] (rounded up to an integer when integral).
func (s *schema) number(integral bool) float64 {
	v := 1.0
	if s.Minimum != nil && v < *s.Minimum {
		v = *s.Minimum
		if integral {
			v = math.Ceil(v)
		}
	}
	if s.Maximum != nil && v > *s.Maximum {
		v = *s.Maximum
		if integral {
			v = math.Floor(v)
		}
	}
	return v
}

// repeatWord returns word repeated, space-separated, up to minLength characters, but no longer
// than about room bytes: linear in its length.
func repeatWord(word string, minLength, room int) string {
	n, wn := utf8.RuneCountInString(word), utf8.RuneCountInString(word)
	if n >= minLength {
		return word
	}
	var sb strings.Builder
	sb.WriteString(word)
	for n < minLength && sb.Len() < room {
		sb.WriteByte(' ')
		sb.WriteString(word)
		n += 1 + wn
	}
	return sb.String()
}

// synthValue returns a JSON value valid for the schema raw (the text.format json_schema
// answer), strings filled with word, at most limit bytes (cut reports that it was cut there).
func synthValue(raw json.RawMessage, word string, limit int) (value string, cut bool) {
	w := newSynth(limit)
	writeValue(w, parseSchema(raw), word, 0)
	return w.result()
}

func firstNonNull(list []*schema) *schema {
	for _, s := range list {
		if s != nil && s.typ() != "null" {
			return s
		}
	}
	if list[0] == nil {
		return &schema{}
	}
	return list[0]
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return []byte("null")
	}
	return b.Bytes()
}

func writeString(b *bytes.Buffer, s string) {
	if plainJSON(s) {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	q, _ := json.Marshal(s) // escapes like encoding/json everywhere else
	if q == nil {
		q = []byte(strconv.Quote(s))
	}
	b.Write(q)
}

// plainJSON reports whether s is its own JSON string body under json.Marshal: printable ASCII
// without '"', '\\' and the characters it escapes for HTML ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
