package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Field statuses of CreateFields.
const (
	// FieldHonoured: Tether acts on the field (the sim and every backend see it, or the server
	// implements it).
	FieldHonoured = "honoured"
	// FieldPassed: validated, echoed and passed to the backend in sampler.Settings; the sim's
	// behaviour is given in the note.
	FieldPassed = "passed to the backend"
	// FieldEchoed: validated and echoed in the Response; it asks for nothing a server must do
	// differently (a hint or the caller's own label), as the note explains.
	FieldEchoed = "echoed"
	// FieldRejected: some values are rejected with unsupported_parameter (the note says which);
	// the others are honoured.
	FieldRejected = "rejected when"
)

// FieldStatus is one row of CreateFields: a create-request field and what Tether does with it.
type FieldStatus struct {
	Name   string // top-level member of the create body
	Status string // FieldHonoured, FieldPassed, FieldEchoed or FieldRejected
	Note   string // what happens, in one sentence
}

// CreateFields lists every field of the create request (the Open Responses schema's
// CreateResponseBody, plus the fields OpenAI and its clients send beyond it) with its status:
// nothing is accepted and silently ignored. docs/fields.md holds the same table; a test walks
// the schema's properties and fails on a missing row.
var CreateFields = []FieldStatus{
	{"model", FieldHonoured, "Required; echoed; selects the upstream model (the sim serves any name)."},
	{"input", FieldHonoured, "String or items; item_reference items resolve against the caller's stored items and the connection's cache; compaction items expand to the window they stand for."},
	{"previous_response_id", FieldHonoured, "Continues a chain (hot, cold or stored path)."},
	{"instructions", FieldHonoured, "Rendered as the first system item of the context."},
	{"include", FieldRejected, "'message.output_text.logprobs' is listed (no logprobs); 'reasoning.encrypted_content' is accepted (the sim emits no reasoning items, upstream backends get it)."},
	{"tools", FieldHonoured, "Function tools are called by the sim; other types (custom, namespace, web_search, tool_search, …) are echoed and passed to the backend, never called by the sim."},
	{"tool_choice", FieldHonoured, "auto, none, required, a named function and allowed_tools (mode and set) steer the sim; a named or allowed tool missing from tools is invalid_value."},
	{"parallel_tool_calls", FieldHonoured, "false limits the sim to one call per step."},
	{"max_output_tokens", FieldHonoured, "Minimum 16; the step stops there (response.incomplete, max_output_tokens)."},
	{"max_tool_calls", FieldHonoured, "Minimum 1; the rollout answers once it has made that many calls."},
	{"metadata", FieldHonoured, "Echoed and stored; sim.* keys drive the sim."},
	{"text", FieldHonoured, "format json_schema / json_object make the sim answer schema-valid JSON (an invalid schema is a 400); verbosity is echoed and passed to the backend, the sim's answer does not vary with it."},
	{"temperature", FieldPassed, "0–2; sim: deterministic whatever the value."},
	{"top_p", FieldPassed, "0–1; sim: deterministic whatever the value."},
	{"presence_penalty", FieldPassed, "−2–2; sim: deterministic whatever the value (no sampling distribution to penalise)."},
	{"frequency_penalty", FieldPassed, "−2–2; sim: deterministic whatever the value (no sampling distribution to penalise)."},
	{"top_logprobs", FieldRejected, "greater than 0 (no logprobs); 0 is echoed."},
	{"reasoning", FieldPassed, "effort (schema enum plus 'minimal') is passed to the backend; summary is echoed; the sim emits no reasoning items."},
	{"truncation", FieldEchoed, "auto or disabled; echoed. The sim drops nothing to fit its context window (`-model-context`): input past it fails the response with `context_length_exceeded` whatever `truncation` says ([limits.md](limits.md#the-sims-context-window))."},
	{"store", FieldHonoured, "false keeps the response out of the store (GET 404, not resolvable over HTTP). A `true` response that its client's disconnect ends after `response.created` (WebSocket of either shape, SSE) is stored `incomplete` (`cancelled`) with its output so far; a non-streamed POST whose client hangs up is not."},
	{"stream", FieldHonoured, "HTTP: SSE when true; WebSocket: always streamed."},
	{"stream_options", FieldRejected, "include_obfuscation is true (no obfuscation field is sent); false or absent is what Tether does."},
	{"background", FieldHonoured, "HTTP: the response runs detached from the request (GET polls it, POST …/cancel cancels it, GET ?stream=true&starting_after=N resumes its events); requires store:true; rejected over WebSocket."},
	{"service_tier", FieldEchoed, "auto, default, flex or priority; echoed as requested; one tier serves all."},
	{"safety_identifier", FieldEchoed, "At most 64 characters; echoed (the caller's label)."},
	{"prompt_cache_key", FieldEchoed, "At most 64 characters; echoed; Tether caches per rollout, keyed by the chain itself."},
	{"user", FieldEchoed, "Echoed (the caller's label)."},
	{"generate", FieldRejected, "false on an append-shape connection, or present over HTTP; false on a public WebSocket is a warm-up."},
	{"stream_id", FieldHonoured, "WebSocket lane (both shapes): its own FIFO, events carry it; invalid_stream_id when empty, over 256 characters or outside [A-Za-z0-9_.-]; websocket_stream_limit_reached past -max-lanes; rejected over HTTP (unsupported_parameter)."},
	{"event_id", FieldEchoed, "WebSocket: the client's correlation id, a string or null (another kind is invalid_type); not echoed, nothing to do."},
	{"client_metadata", FieldEchoed, "Codex's client-side map (trace headers); accepted, not used."},
	{"conversation", FieldRejected, "not null (no conversation objects)."},
	{"prompt", FieldRejected, "not null (no prompt templates)."},
	{"context_management", FieldRejected, "not null (no server-side compaction; use POST /v1/responses/compact)."},
	{"moderation", FieldRejected, "not null."},
	{"prompt_cache_options", FieldRejected, "not null."},
	{"prompt_cache_retention", FieldRejected, "anything but 'in-memory' (or null): the cache lives in memory only."},
}

// createFieldSet holds the names of CreateFields, for the decoder's unknown_parameter check.
var createFieldSet = func() map[string]bool {
	m := make(map[string]bool, len(CreateFields))
	for _, f := range CreateFields {
		m[f.Name] = true
	}
	return m
}()

// createField reports whether key is a row of CreateFields (no allocation).
func createField(key []byte) bool { return createFieldSet[string(key)] }

// errUnknown is unknown_parameter for the top-level member param, worded as OpenAI words it.
func errUnknown(param string) *Error {
	return Errorf(400, CodeUnknownParameter, param, "Unknown parameter: '%s'.", clip(param))
}

func errUnsupported(param string) *Error {
	return Errorf(400, CodeUnsupportedParameter, param, "Unsupported parameter: '%s' is not supported by this server.", clip(param))
}

// MaxModelNameLength is the longest model name, in bytes, that can name a model: longer ids
// than any engine or hosted API gives out, short enough that echoing the name on every event
// of a turn costs nothing.
const MaxModelNameLength = 256

// CheckModelName refuses a model name that names no model on any backend: one holding a
// control character (Unicode Cc: U+0000–U+001F, U+007F–U+009F) or an invisible one (a format
// character, Cf, such as U+200B or U+FEFF; the line and paragraph separators U+2028 and
// U+2029), or longer than MaxModelNameLength bytes. Either is 404 model_not_found with param model, as an unknown model
// is refused, the name shown Go-quoted (escaped) and clipped in the message, never raw. Other
// names are nil: which models exist is the backend's to say.
func CheckModelName(model string) *Error {
	if len(model) > MaxModelNameLength {
		return Errorf(404, CodeModelNotFound, "model",
			"The model %s does not exist: a model name is at most %d bytes (this one has %d). GET /v1/models lists the models.",
			strconv.Quote(clip(model)), MaxModelNameLength, len(model))
	}
	i := strings.IndexFunc(model, unnamable)
	if i < 0 {
		return nil
	}
	r, _ := utf8.DecodeRuneInString(model[i:])
	return Errorf(404, CodeModelNotFound, "model",
		"The model %s does not exist: a model name holds no control or invisible characters (this one has U+%04X at byte %d). GET /v1/models lists the models.",
		strconv.Quote(clip(model)), r, i)
}

// unnamable reports a character no model name holds: a control character, a format character
// (invisible: zero-width spaces and joiners, direction marks, the byte order mark), or a line
// or paragraph separator.
func unnamable(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// checkCreate applies the rules of CreateFields that need the decoded request: a model name
// with a control character (CheckModelName), rejected values, tool_choice against tools, and
// text.format.
func checkCreate(cp *CreateParams) *Error {
	if err := CheckModelName(cp.Model); err != nil {
		return err
	}
	if cp.TopLogprobs != nil && *cp.TopLogprobs > 0 {
		return Errorf(400, CodeUnsupportedParameter, "top_logprobs", "Unsupported parameter: 'top_logprobs' greater than 0; this server returns no logprobs.")
	}
	for i, inc := range cp.Include {
		if inc == "message.output_text.logprobs" {
			return Errorf(400, CodeUnsupportedParameter, fmt.Sprintf("include[%d]", i),
				"Unsupported value: 'message.output_text.logprobs'; this server returns no logprobs.")
		}
	}
	if cp.IncludeObfuscation != nil && *cp.IncludeObfuscation {
		return Errorf(400, CodeUnsupportedParameter, "stream_options.include_obfuscation",
			"Unsupported value: 'stream_options.include_obfuscation' true; this server sends no obfuscation padding.")
	}
	if err := CheckToolChoice(cp.ToolChoice, cp.Tools); err != nil {
		return err
	}
	if cp.Text != nil {
		if err := checkFormat(cp.Text.Format); err != nil {
			return err
		}
		cp.Text.Format = fillFormat(cp.Text.Format)
	}
	return nil
}

// fillFormat gives a json_schema format every member the Response's JsonSchemaResponseFormat
// requires: description (null when not sent) and strict (false when not sent), in the order
// type, name, description, schema, strict. Other formats are returned as is.
func fillFormat(raw json.RawMessage) json.RawMessage {
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f.Type != "json_schema" {
		return raw
	}
	strict := f.Strict != nil && *f.Strict
	b, err := json.Marshal(struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      bool            `json:"strict"`
	}{f.Type, f.Name, f.Description, f.Schema, strict})
	if err != nil {
		return raw
	}
	return b
}

// checkFormat checks text.format's shape: json_schema needs a name and a schema object (whether
// the schema compiles is session.CheckFormat's call, outside this package).
func checkFormat(raw json.RawMessage) *Error {
	if len(raw) == 0 {
		return nil
	}
	var f struct {
		Type   json.RawMessage `json:"type"`
		Name   json.RawMessage `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return Errorf(400, CodeInvalidType, "text.format", "Invalid 'text.format': %v.", err)
	}
	for _, m := range []struct {
		param string
		v     json.RawMessage
	}{{"text.format.type", f.Type}, {"text.format.name", f.Name}} {
		if len(m.v) > 0 && m.v[0] != '"' && string(m.v) != "null" {
			return Errorf(400, CodeInvalidType, m.param, "Invalid type for '%s': expected a string, but got %s.", m.param, kindName(jsontext.Kind(m.v[0])))
		}
	}
	var typ string
	if len(f.Type) > 0 && f.Type[0] == '"' {
		_ = json.Unmarshal(f.Type, &typ) // a string token: no error
	}
	if typ != "json_schema" {
		return nil
	}
	switch {
	case len(f.Name) == 0 || string(f.Name) == "null":
		return errMissing("text.format.name")
	case len(f.Schema) == 0 || string(f.Schema) == "null":
		return errMissing("text.format.schema")
	case f.Schema[0] != '{':
		return Errorf(400, CodeInvalidType, "text.format.schema", "Invalid type for 'text.format.schema': expected an object.")
	}
	return nil
}

// FieldRow renders f as a row of the Markdown table in docs/fields.md.
func FieldRow(f FieldStatus) string {
	return "| `" + f.Name + "` | " + f.Status + " | " + f.Note + " |"
}
