package session

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tetherd/tether/protocol"
)

// CheckFormat rejects a text.format json_schema whose schema does not compile:
// invalid_json_schema (400, param "text.format.schema"). The decoder has already checked the
// format's shape.
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
