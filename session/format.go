package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tetherd/tether/protocol"
)

// CheckFormat rejects a text.format json_schema whose schema is over CheckSchemaSize's bounds or
// does not compile: invalid_json_schema (400, param "text.format.schema"). The decoder has
// already checked the format's shape. The bounds keep compilation short (the compiler takes no
// context, so it cannot stop when the client goes).
func CheckFormat(p *protocol.CreateParams) error {
	if p.Text == nil || len(p.Text.Format) == 0 {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(p.Text.Format, &f) != nil || f.Type != "json_schema" {
		return nil
	}
	if err := CheckSchemaSize(f.Schema); err != nil {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidSchema, "text.format.schema",
			"Invalid schema for response_format '%s': %v", f.Name, err)
	}
	if _, err := CompileSchema(f.Schema); err != nil {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidSchema, "text.format.schema",
			"Invalid schema for response_format '%s': %v", f.Name, err)
	}
	return nil
}

// CompileSchema compiles a JSON schema (draft 2020-12 unless its $schema says otherwise). No
// $ref outside the document is loaded: no files, no network.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const url = "mem:///text-format.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Bounds of a text.format schema (CheckSchemaSize). Compiling validates the schema against its
// metaschema, whose cost grows with the square of an object's width and of the nesting: 80,000
// properties took 52 CPU-seconds, 5,000 about half a second.
const (
	// MaxSchemaProperties bounds the properties of all the schema's objects together, as
	// OpenAI's structured outputs do.
	MaxSchemaProperties = 5000
	// MaxSchemaObjects bounds the JSON objects in the schema (subschemas, properties maps,
	// $defs).
	MaxSchemaObjects = 10000
	// MaxSchemaValues bounds the JSON values in the schema (enum members included).
	MaxSchemaValues = 100000
	// MaxSchemaNesting bounds the JSON nesting of the schema (a property's schema is two levels
	// below its object's).
	MaxSchemaNesting = 64
)

// CheckSchemaSize returns an error naming the first bound raw passes (MaxSchemaProperties,
// MaxSchemaObjects, MaxSchemaValues, MaxSchemaNesting), or nil. It reads raw once, token by
// token, and stops at the bound; malformed JSON is left to the compiler's error.
func CheckSchemaSize(raw json.RawMessage) error {
	type level struct {
		object     bool
		properties bool // a "properties" map: its keys are properties
		key        bool // the next token of this object is a key
		markNext   bool // the value after the current key is a properties map
	}
	var stack []level
	props, objects, values := 0, 0, 0
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or malformed: CompileSchema reports it
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.object && top.key { // a key
			top.key = false
			name, _ := tok.(string)
			top.markNext = !top.properties && name == "properties"
			if top.properties {
				if props++; props > MaxSchemaProperties {
					return fmt.Errorf("the schema has more than %d properties", MaxSchemaProperties)
				}
			}
			continue
		}
		if values++; values > MaxSchemaValues {
			return fmt.Errorf("the schema has more than %d JSON values", MaxSchemaValues)
		}
		mark := false
		if top != nil && top.object {
			mark, top.markNext, top.key = top.markNext, false, true
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= MaxSchemaNesting {
				return fmt.Errorf("the schema nests more than %d levels of JSON", MaxSchemaNesting)
			}
			if d == '{' {
				if objects++; objects > MaxSchemaObjects {
					return fmt.Errorf("the schema has more than %d JSON objects", MaxSchemaObjects)
				}
			}
			stack = append(stack, level{object: d == '{', properties: d == '{' && mark, key: d == '{'})
		}
	}
}
