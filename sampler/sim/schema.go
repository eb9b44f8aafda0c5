package sim

import (
	"bytes"
	"encoding/json"
	"strconv"

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

// isShellTool reports whether a function tool is shell-like: named exec_command, shell,
// shell_command or local_shell, or with a required cmd/command property.
func isShellTool(t *protocol.Tool) bool {
	return shellTools[t.Name] || commandProperty(parseSchema(t.Parameters)) != ""
}

// synthArguments returns the JSON arguments of a call of t: an object holding the schema's
// required properties only, in the order of "required". A shell-like tool's cmd/command gets
// "echo <marker>" (["echo","<marker>"] when array-typed); other values are synthesised: const
// or the first enum value, string → word, number/integer → 1, boolean → true, array → [],
// object → its required properties, recursively.
func synthArguments(t *protocol.Tool, marker, word string) string {
	s := parseSchema(t.Parameters)
	cmd := ""
	if isShellTool(t) {
		cmd = commandProperty(s)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range s.Required {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, name)
		b.WriteByte(':')
		prop := s.Properties[name]
		if prop == nil {
			prop = &schema{}
		}
		if name == cmd {
			if prop.typ() == "array" {
				b.WriteString(`["echo",`)
				writeString(&b, marker)
				b.WriteByte(']')
			} else {
				writeString(&b, "echo "+marker)
			}
			continue
		}
		writeValue(&b, prop, word, 0)
	}
	b.WriteByte('}')
	return b.String()
}

const maxSchemaDepth = 8

func writeValue(b *bytes.Buffer, s *schema, word string, depth int) {
	switch {
	case len(s.Const) > 0:
		b.Write(compact(s.Const))
		return
	case len(s.Enum) > 0:
		b.Write(compact(s.Enum[0]))
		return
	case len(s.AnyOf) > 0:
		writeValue(b, firstNonNull(s.AnyOf), word, depth+1)
		return
	case len(s.OneOf) > 0:
		writeValue(b, firstNonNull(s.OneOf), word, depth+1)
		return
	}
	typ := s.typ()
	if typ == "" && s.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "number", "integer":
		b.WriteByte('1')
	case "boolean":
		b.WriteString("true")
	case "array":
		b.WriteString("[]")
	case "null":
		b.WriteString("null")
	case "object":
		b.WriteByte('{')
		if depth < maxSchemaDepth {
			for i, name := range s.Required {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(b, name)
				b.WriteByte(':')
				prop := s.Properties[name]
				if prop == nil {
					prop = &schema{}
				}
				writeValue(b, prop, word, depth+1)
			}
		}
		b.WriteByte('}')
	default: // string, or no type
		writeString(b, word)
	}
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
	q, _ := json.Marshal(s) // escapes like encoding/json everywhere else
	if q == nil {
		q = []byte(strconv.Quote(s))
	}
	b.Write(q)
}
