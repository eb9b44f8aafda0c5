package conformance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas are the compiled schemas of the Open Responses OpenAPI file that -schema names.
type schemas struct {
	byType   map[string]*jsonschema.Schema // streaming event type → its schema
	response *jsonschema.Schema            // ResponseResource
	wsError  *jsonschema.Schema            // WebSocketErrorEvent
}

var (
	schemaMu    sync.Mutex // guards schemaCache
	schemaCache = map[string]*schemas{}
)

// loadSchemas compiles the streaming event schemas, ResponseResource and WebSocketErrorEvent
// of the OpenAPI file (cached per absolute path).
func loadSchemas(file string) (*schemas, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s := schemaCache[abs]; s != nil {
		return s, nil
	}
	raw, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "file:///openresponses.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	root, _ := doc.(map[string]any)
	comps, _ := root["components"].(map[string]any)
	defs, _ := comps["schemas"].(map[string]any)
	if defs == nil {
		return nil, fmt.Errorf("%s: no components.schemas", file)
	}
	s := &schemas{byType: map[string]*jsonschema.Schema{}}
	for name, v := range defs {
		if !strings.HasSuffix(name, "StreamingEvent") || name == "ErrorStreamingEvent" {
			continue
		}
		def, _ := v.(map[string]any)
		props, _ := def["properties"].(map[string]any)
		typ, _ := props["type"].(map[string]any)
		enum, _ := typ["enum"].([]any)
		if len(enum) != 1 {
			continue
		}
		sch, err := c.Compile(url + "#/components/schemas/" + name)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", file, name, err)
		}
		et, _ := enum[0].(string)
		s.byType[et] = sch
	}
	if s.response, err = c.Compile(url + "#/components/schemas/ResponseResource"); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if s.wsError, err = c.Compile(url + "#/components/schemas/WebSocketErrorEvent"); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	schemaCache[abs] = s
	return s, nil
}

// validateEvent validates one server event and the Response it carries. WebSocket error
// frames are validated against WebSocketErrorEvent (they carry no sequence_number, which
// ErrorStreamingEvent requires). Events the Open Responses file does not define (the append
// shape's response.done, response.steer.*) are not validated; the grammar checks them.
func (s *schemas) validateEvent(f Frame, raw []byte, websocket bool) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var sch *jsonschema.Schema
	switch {
	case f.Type() == "error" && websocket:
		sch = s.wsError
	default:
		sch = s.byType[f.Type()]
	}
	if sch == nil {
		return nil
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s does not match its schema: %s", f.Type(), clip(err.Error(), 1500))
	}
	if resp, ok := v.(map[string]any)["response"]; ok {
		if err := s.response.Validate(resp); err != nil {
			return fmt.Errorf("the Response of %s does not match ResponseResource: %s", f.Type(), clip(err.Error(), 1500))
		}
	}
	return nil
}

// validateResponse validates a Response object (an HTTP body).
func (s *schemas) validateResponse(raw []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := s.response.Validate(v); err != nil {
		return fmt.Errorf("the Response does not match ResponseResource: %s", clip(err.Error(), 1500))
	}
	return nil
}
