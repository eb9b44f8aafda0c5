package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Metadata limits (the Responses API's limits).
const (
	MaxMetadataKeys     = 16  // keys per metadata object
	MaxMetadataKeyLen   = 64  // characters per key
	MaxMetadataValueLen = 512 // characters per value
)

var (
	roleValues       = []string{RoleUser, RoleAssistant, RoleSystem, RoleDeveloper}
	statusValues     = []string{StatusInProgress, StatusCompleted, StatusIncomplete}
	toolChoiceModes  = []string{ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired}
	truncationValues = []string{"auto", "disabled"}
	verbosityValues  = []string{"low", "medium", "high"}
)

// DecodeClientEvent decodes one client frame (a WebSocket text frame, or with Type set by the
// caller a POST body — see DecodeCreateParams) strictly, following the error table of
// doc.go. It returns the first problem found as a 400 *Error whose Param is the path
// of the offending value ("input[2].content[0].text"):
//
//   - not JSON, truncated, or not an object: invalid_json, Param "".
//   - "type" missing or null: missing_required_parameter "type"; not a string: invalid_type;
//     not one of the five client event types: unknown_event_type "type".
//   - a required field missing or null: missing_required_parameter (e.g. "model",
//     "response_id", "input[0].call_id").
//   - a value of the wrong JSON type, a number that does not fit a float64 (1e400, anywhere in
//     the frame, even in an ignored field), a fraction or out-of-range integer:
//     invalid_type.
//   - a string outside its enum (role, status, tool_choice, truncation, text.verbosity) or
//     metadata over its limits: invalid_value.
//   - a top-level member the event does not have ("temprature"): unknown_parameter, Param
//     the member.
//
// Members are checked in document order; missing required fields are reported after the walk.
// A member repeated in the top-level object of response.create, response.append,
// response.cancel or response.processed (or of a POST body) is rejected: invalid_value with
// Param the key, so that no two readers of one frame see different requests (a response.steer
// frame is kept whole, and of an unknown type the first "type" is reported). Inside nested
// objects every occurrence of a member is checked and the last one wins, as in encoding/json,
// except that the first "type" selects the shape of an item, content part, tool or
// tool_choice. A top-level member the event does not have is unknown_parameter with Param the
// member: for a create, one that is no row of CreateFields; for response.append, one other than
// type, response_id, input and event_id; for response.cancel and response.processed, one other
// than type, response_id and event_id. Unknown members of nested objects are ignored, so that
// newer item, part and tool shapes pass. The decoder records background,
// stream_id and generate without judging them: the shape adapters reject what their shape does
// not support.
//
// DecodeClientEvent does not retain data: strings and raw values are copied.
func DecodeClientEvent(data []byte) (ClientEvent, *Error) {
	r, err := newObjectReader(data, "frame")
	if err != nil {
		return ClientEvent{}, err
	}
	typ, found, _, err := r.findType(nil)
	if err != nil {
		return ClientEvent{}, err
	}
	if !found {
		return ClientEvent{}, errMissing(child(nil, "type"))
	}
	switch ClientEventType(typ) {
	case EventCreate:
		start := r.pos
		cp, err := r.create(true)
		if err == nil {
			err = checkBounds(data, start)
		}
		if err == nil {
			err = checkCreate(cp)
		}
		if err != nil {
			return ClientEvent{Type: EventCreate}, err
		}
		return ClientEvent{Type: EventCreate, Create: cp}, nil
	case EventAppend:
		ev := ClientEvent{Type: EventAppend}
		return ev, r.append(&ev)
	case EventCancel, EventProcessed:
		ev := ClientEvent{Type: EventCancel}
		if ClientEventType(typ) == EventProcessed {
			ev.Type = EventProcessed
		}
		return ev, r.responseIDOnly(&ev)
	case EventSteer:
		if err := r.skipChecked(nil); err != nil {
			return ClientEvent{}, err
		}
		return ClientEvent{Type: EventSteer, Steer: append(json.RawMessage(nil), data...)}, nil
	}
	return ClientEvent{Type: ClientEventType(typ)}, UnknownEventType(string(typ),
		"'response.create', 'response.append', 'response.cancel', 'response.processed', and 'response.steer'")
}

// UnknownEventType is the unknown_event_type error (400, param "type") for the event type typ,
// listing the supported types. DecodeClientEvent returns it with ClientEvent.Type set to typ and
// lists the types of both shapes; an adapter can answer with the list of its own shape.
func UnknownEventType(typ, supported string) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeUnknownEventType, Param: "type",
		Message: fmt.Sprintf("Unknown event type '%s'. Supported types are: %s.", clip(typ), supported)}
}

// DecodeCreateParams decodes the body of POST /v1/responses: the same fields and errors as a
// response.create frame, without the "type" member (any "type" member is ignored).
func DecodeCreateParams(data []byte) (*CreateParams, *Error) {
	r, err := newObjectReader(data, "request body")
	if err != nil {
		return nil, err
	}
	start := r.pos
	cp, err := r.create(false)
	if err == nil {
		err = checkBounds(data, start)
	}
	if err == nil {
		err = checkCreate(cp)
	}
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// newObjectReader checks that data is one JSON object and returns a reader at its '{'. noun
// names data in the error messages ("frame", "request body").
func newObjectReader(data []byte, noun string) (reader, *Error) {
	if !utf8.Valid(data) {
		rfc := "RFC 8259"
		if noun == "frame" {
			rfc += ", RFC 6455 text frames"
		}
		return reader{}, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON,
			Message: "The " + noun + " is not valid UTF-8: JSON text must be UTF-8 (" + rfc + ")."}
	}
	if !validJSON(data) {
		var v json.RawMessage
		msg := "invalid JSON"
		if err := json.Unmarshal(data, &v); err != nil {
			msg = err.Error()
		}
		return reader{}, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON,
			Message: "The " + noun + " is not valid JSON: " + msg + "."}
	}
	r := reader{data: data, noun: noun}
	if c := r.peek(); c != '{' {
		return reader{}, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON,
			Message: "The " + noun + " is not valid JSON: expected an object, but got " + kindName(c) + "."}
	}
	return r, nil
}

// newValueReader checks that data is one JSON value and returns a reader at it (for the
// UnmarshalJSON methods).
func newValueReader(data []byte) (reader, *Error) {
	if !validJSON(data) {
		return reader{}, &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON, Message: "The value is not valid JSON."}
	}
	return reader{data: data}, nil
}

// findType scans the object at r.pos for its "type" member without moving r. found is false
// when the member is missing or null; err is invalid_type when it is not a string. role
// reports whether a "role" member was seen before the type (or anywhere, when found is false).
func (r reader) findType(p *path) (typ []byte, found, role bool, err *Error) {
	r.open()
	for {
		key, ok := r.member()
		if !ok {
			return nil, false, role, nil
		}
		switch string(key) {
		case "type":
			switch c := r.peek(); c {
			case 'n':
			case '"':
				return r.strBytes(), true, role, nil
			default:
				return nil, false, role, errType(child(p, "type"), "a string", c)
			}
		case "role":
			role = true
		}
		r.skip()
	}
}

// create decodes a response.create body at r.pos. skipType ignores the "type" member.
func (r *reader) create(skipType bool) (*CreateParams, *Error) {
	cp := &CreateParams{}
	haveModel := false
	err := r.frame(func(key []byte) (err *Error) {
		kp := path{key: key, index: -1}
		p := &kp
		switch string(key) {
		case "type":
			if skipType {
				r.skip()
			}
		case "model":
			cp.Model, err = r.strOrNull(p)
			haveModel = cp.Model != ""
		case "input":
			cp.Input, err = r.input(p)
		case "instructions":
			cp.Instructions, err = r.optStr(p)
		case "previous_response_id":
			cp.PreviousResponseID, err = r.optStr(p)
		case "tools":
			cp.Tools, err = r.tools(p)
		case "tool_choice":
			cp.ToolChoice, err = r.toolChoice(p)
		case "parallel_tool_calls":
			cp.ParallelToolCalls, err = r.optBool(p)
		case "max_output_tokens":
			cp.MaxOutputTokens, err = r.optInt(p, -maxExactInt)
		case "max_tool_calls":
			cp.MaxToolCalls, err = r.optInt(p, -maxExactInt)
		case "top_logprobs":
			cp.TopLogprobs, err = r.optInt(p, -maxExactInt)
		case "metadata":
			cp.Metadata, err = r.metadata(p)
		case "store":
			cp.Store, err = r.optBool(p)
		case "stream":
			var b *bool
			b, err = r.optBool(p)
			cp.Stream = b != nil && *b
		case "generate":
			cp.Generate, err = r.optBool(p)
		case "background":
			cp.Background, err = r.optBool(p)
		case "temperature":
			cp.Temperature, err = r.optFloat(p)
		case "top_p":
			cp.TopP, err = r.optFloat(p)
		case "presence_penalty":
			cp.PresencePenalty, err = r.optFloat(p)
		case "frequency_penalty":
			cp.FrequencyPenalty, err = r.optFloat(p)
		case "reasoning":
			cp.Reasoning, err = r.reasoning(p)
		case "text":
			cp.Text, err = r.textConfig(p)
		case "truncation":
			cp.Truncation, err = r.optEnum(p, truncationValues)
		case "user":
			cp.User, err = r.optStr(p)
		case "safety_identifier":
			cp.SafetyIdentifier, err = r.optStr(p)
		case "prompt_cache_key":
			cp.PromptCacheKey, err = r.optStr(p)
		case "service_tier":
			cp.ServiceTier, err = r.optStr(p)
		case "stream_id":
			if cp.StreamID, err = r.optStr(p); err != nil { // not a string: a bad lane name
				err = CheckStreamID(new(""))
			}
		case "include":
			cp.Include, err = r.strings(p)
		case "stream_options":
			cp.IncludeObfuscation, err = r.streamOptions(p)
		case "prompt_cache_retention":
			var v *string
			if v, err = r.optStr(p); v != nil && *v != "in-memory" && *v != "in_memory" {
				err = Errorf(400, CodeUnsupportedParameter, "prompt_cache_retention",
					"Unsupported value: 'prompt_cache_retention' '%s'; this server keeps its cache in memory only ('in-memory').", clip(*v))
			}
		case "conversation", "prompt", "context_management", "moderation", "prompt_cache_options":
			if !r.null() {
				err = errUnsupported(string(key))
			}
		default:
			// Rows of CreateFields without a case (event_id, client_metadata) are accepted
			// and skipped; any other member is unknown.
			if !createField(key) {
				err = errUnknown(string(key))
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !haveModel {
		return nil, errMissing(child(nil, "model"))
	}
	return cp, nil
}

// append decodes a response.append frame {response_id, input}.
func (r *reader) append(ev *ClientEvent) *Error {
	haveInput := false
	err := r.frame(func(key []byte) (err *Error) {
		kp := path{key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "response_id":
			ev.ResponseID, err = r.strOrNull(&kp)
		case "event_id":
		case "input":
			switch c := r.peek(); c {
			case 'n':
				r.token()
			case '[':
				ev.Input, err = r.items(&kp)
				haveInput = true
			default:
				err = errType(&kp, "an array of input items", c)
			}
		default:
			err = errUnknown(string(key))
		}
		return err
	})
	if err != nil {
		return err
	}
	if ev.ResponseID == "" {
		return errMissing(child(nil, "response_id"))
	}
	if !haveInput {
		return errMissing(child(nil, "input"))
	}
	return nil
}

// responseIDOnly decodes response.cancel and response.processed {response_id}.
func (r *reader) responseIDOnly(ev *ClientEvent) *Error {
	err := r.frame(func(key []byte) (err *Error) {
		kp := path{key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "response_id":
			ev.ResponseID, err = r.strOrNull(&kp)
		case "event_id":
		default:
			err = errUnknown(string(key))
		}
		return err
	})
	if err != nil {
		return err
	}
	if ev.ResponseID == "" {
		return errMissing(child(nil, "response_id"))
	}
	return nil
}

// optEnum reads a string from values, or null (nil).
func (r *reader) optEnum(p *path, values []string) (*string, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '"':
		v, err := r.enum(p, values)
		if err != nil {
			return nil, err
		}
		return &v, nil
	default:
		return nil, errType(p, "a string", c)
	}
}

// enum reads a string token that must be one of values; it returns the matching value
// (no allocation).
func (r *reader) enum(p *path, values []string) (string, *Error) {
	b := r.strBytes()
	for _, v := range values {
		if string(b) == v {
			return v, nil
		}
	}
	return "", errValue(p, string(b), values)
}

// input reads a create's input: a string (one user message) or an array of items; null is
// omitted.
func (r *reader) input(p *path) ([]Item, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '"':
		s := r.str()
		return []Item{{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: s}}}}, nil
	case '[':
		return r.items(p)
	default:
		return nil, errType(p, "a string or an array of input items", c)
	}
}

// items reads an array of input items (r at '['). The result is non-nil, also when empty.
func (r *reader) items(p *path) ([]Item, *Error) {
	r.open()
	items := []Item{}
	for i := 0; r.elem(); i++ {
		ep := path{parent: p, index: i}
		items = append(items, Item{})
		if err := r.item(&ep, &items[len(items)-1]); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// item reads one input item. An object without "type" but with "role" is a
// message ("easy message"); message, function_call and function_call_output are modelled; any
// other type is kept verbatim (compacted) in Raw with ID and Status taken from it when they are
// strings.
func (r *reader) item(p *path, it *Item) *Error {
	c := r.peek()
	if c != '{' {
		return errType(p, "an object", c)
	}
	typ, found, role, err := r.findType(p)
	if err != nil {
		return err
	}
	switch {
	case !found && role, found && string(typ) == ItemMessage:
		return r.message(p, it)
	case !found:
		return errMissing(child(p, "type"))
	case string(typ) == ItemFunctionCall:
		return r.functionCall(p, it)
	case string(typ) == ItemFunctionCallOutput:
		return r.functionCallOutput(p, it)
	}
	it.Type = string(typ)
	start := r.pos
	err = r.object(p, func(key []byte) *Error {
		switch string(key) {
		case "id":
			if r.peek() == '"' {
				it.ID = r.str()
			}
		case "status":
			if r.peek() == '"' {
				it.Status = r.str()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	it.Raw = compactCopy(r.data[start:r.pos])
	if it.Type == ItemReference && it.ID == "" {
		return errMissing(child(p, "id"))
	}
	return nil
}

// message reads a message item at r.pos.
func (r *reader) message(p *path, it *Item) *Error {
	it.Type = ItemMessage
	var (
		text      string
		isString  bool
		haveParts bool
	)
	err := r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "role":
			switch c := r.peek(); c {
			case 'n':
				r.token()
				it.Role = ""
			case '"':
				it.Role, err = r.enum(&kp, roleValues)
			default:
				err = errType(&kp, "a string", c)
			}
		case "content":
			switch c := r.peek(); c {
			case 'n':
				r.token()
				isString, haveParts = false, false
			case '"':
				text = r.str()
				isString, haveParts = true, false
			case '[':
				it.Content, err = r.parts(&kp)
				isString, haveParts = false, true
			default:
				err = errType(&kp, "a string or an array of content parts", c)
			}
		case "id":
			it.ID, err = r.strOrNull(&kp)
		case "status":
			err = r.status(&kp, &it.Status)
		}
		return err
	})
	if err != nil {
		return err
	}
	if it.Role == "" {
		return errMissing(child(p, "role"))
	}
	switch {
	case isString:
		t := PartInputText
		if it.Role == RoleAssistant {
			t = PartOutputText
		}
		it.Content = []ContentPart{{Type: t, Text: text}}
	case !haveParts:
		return errMissing(child(p, "content"))
	}
	return nil
}

// status reads an item status (in_progress | completed | incomplete) or null.
func (r *reader) status(p *path, dst *string) *Error {
	s, err := r.optEnum(p, statusValues)
	if s != nil {
		*dst = *s
	} else {
		*dst = ""
	}
	return err
}

// reqStr reads a required string member: null leaves it missing.
func (r *reader) reqStr(p *path, dst *string, have *bool) *Error {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		*dst, *have = "", false
	case '"':
		*dst, *have = r.str(), true
	default:
		return errType(p, "a string", c)
	}
	return nil
}

// functionCall reads a function_call item at r.pos.
func (r *reader) functionCall(p *path, it *Item) *Error {
	it.Type = ItemFunctionCall
	var haveCall, haveName, haveArgs bool
	err := r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "call_id":
			err = r.reqStr(&kp, &it.CallID, &haveCall)
		case "name":
			err = r.reqStr(&kp, &it.Name, &haveName)
		case "arguments":
			err = r.reqStr(&kp, &it.Arguments, &haveArgs)
		case "id":
			it.ID, err = r.strOrNull(&kp)
		case "status":
			err = r.status(&kp, &it.Status)
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case !haveCall:
		return errMissing(child(p, "call_id"))
	case !haveName:
		return errMissing(child(p, "name"))
	case !haveArgs:
		return errMissing(child(p, "arguments"))
	}
	return nil
}

// functionCallOutput reads a function_call_output item at r.pos. An array output is kept in
// OutputParts and its text parts are joined into Output.
func (r *reader) functionCallOutput(p *path, it *Item) *Error {
	it.Type = ItemFunctionCallOutput
	var haveCall, haveOutput bool
	err := r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "call_id":
			err = r.reqStr(&kp, &it.CallID, &haveCall)
		case "output":
			switch c := r.peek(); c {
			case 'n':
				r.token()
				it.Output, it.OutputParts, haveOutput = "", nil, false
			case '"':
				it.Output, it.OutputParts, haveOutput = r.str(), nil, true
			case '[':
				it.OutputParts, err = r.parts(&kp)
				it.Output, haveOutput = joinText(it.OutputParts), true
			default:
				err = errType(&kp, "a string or an array of content parts", c)
			}
		case "id":
			it.ID, err = r.strOrNull(&kp)
		case "status":
			err = r.status(&kp, &it.Status)
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case !haveCall:
		return errMissing(child(p, "call_id"))
	case !haveOutput:
		return errMissing(child(p, "output"))
	}
	return nil
}

// joinText concatenates the text of input_text and output_text parts.
func joinText(parts []ContentPart) string {
	if len(parts) == 1 {
		return parts[0].textOnly()
	}
	var b strings.Builder
	for i := range parts {
		b.WriteString(parts[i].textOnly())
	}
	return b.String()
}

func (p *ContentPart) textOnly() string {
	if p.Type == PartInputText || p.Type == PartOutputText {
		return p.Text
	}
	return ""
}

// parts reads an array of content parts (r at '['). The result is non-nil, also when empty.
func (r *reader) parts(p *path) ([]ContentPart, *Error) {
	r.open()
	parts := []ContentPart{}
	for i := 0; r.elem(); i++ {
		ep := path{parent: p, index: i}
		parts = append(parts, ContentPart{})
		if err := r.part(&ep, &parts[len(parts)-1]); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// part reads one content part. input_text, output_text, summary_text and reasoning_text need
// "text", refusal needs "refusal" (strings); any other type (input_image, input_file, …) is
// kept in Raw.
func (r *reader) part(p *path, pt *ContentPart) *Error {
	c := r.peek()
	if c != '{' {
		return errType(p, "an object", c)
	}
	typ, found, _, err := r.findType(p)
	if err != nil {
		return err
	}
	if !found {
		return errMissing(child(p, "type"))
	}
	textKey := "text"
	switch string(typ) {
	case PartInputText:
		pt.Type = PartInputText
	case PartOutputText:
		pt.Type = PartOutputText
	case PartSummary:
		pt.Type = PartSummary
	case PartReasoning:
		pt.Type = PartReasoning
	case PartRefusal:
		pt.Type, textKey = PartRefusal, "refusal"
	default:
		pt.Type = string(typ)
		pt.Raw, err = r.raw(p)
		return err
	}
	haveText := false
	err = r.object(p, func(key []byte) *Error {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case textKey:
			return r.reqStr(&kp, &pt.Text, &haveText)
		}
		return nil
	})
	if err == nil && !haveText {
		return errMissing(child(p, textKey))
	}
	return err
}

// tools reads the tools array, or null.
func (r *reader) tools(p *path) ([]Tool, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '[':
	default:
		return nil, errType(p, "an array of tools", c)
	}
	r.open()
	tools := []Tool{}
	for i := 0; r.elem(); i++ {
		ep := path{parent: p, index: i}
		tools = append(tools, Tool{})
		if err := r.tool(&ep, &tools[len(tools)-1]); err != nil {
			return nil, err
		}
	}
	return tools, nil
}

// tool reads one tool: a function tool is modelled, other types are kept in
// Raw.
func (r *reader) tool(p *path, t *Tool) *Error {
	c := r.peek()
	if c != '{' {
		return errType(p, "an object", c)
	}
	typ, found, _, err := r.findType(p)
	if err != nil {
		return err
	}
	if !found {
		return errMissing(child(p, "type"))
	}
	if string(typ) != ToolFunction {
		t.Type = string(typ)
		t.Raw, err = r.raw(p)
		return err
	}
	t.Type = ToolFunction
	haveName := false
	err = r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "name":
			err = r.reqStr(&kp, &t.Name, &haveName)
		case "description":
			t.Description, err = r.optStr(&kp)
		case "parameters":
			t.Parameters, err = r.optRawObject(&kp)
		case "strict":
			t.Strict, err = r.optBool(&kp)
		}
		return err
	})
	if err == nil && !haveName {
		return errMissing(child(p, "name"))
	}
	return err
}

// toolChoice reads tool_choice: a mode string, {"type":"function","name":…}, another object
// (kept in Raw), or null (zero).
func (r *reader) toolChoice(p *path) (ToolChoice, *Error) {
	var tc ToolChoice
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return tc, nil
	case '"':
		var err *Error
		tc.Mode, err = r.enum(p, toolChoiceModes)
		return tc, err
	case '{':
	default:
		return tc, errType(p, "a string or an object", c)
	}
	typ, found, _, err := r.findType(p)
	if err != nil {
		return tc, err
	}
	if !found {
		return tc, errMissing(child(p, "type"))
	}
	if string(typ) == ToolChoiceAllowed {
		return r.allowedTools(p)
	}
	if string(typ) != ToolFunction {
		tc.Raw, err = r.raw(p)
		return tc, err
	}
	haveName := false
	err = r.object(p, func(key []byte) *Error {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			r.skip()
		case "name":
			return r.reqStr(&kp, &tc.Name, &haveName)
		}
		return nil
	})
	if err == nil && (!haveName || tc.Name == "") {
		return tc, errMissing(child(p, "name"))
	}
	return tc, err
}

// allowedTools reads {"type":"allowed_tools","mode":…,"tools":[{"type":"function","name":…}]}:
// Mode is the mode ("auto" when omitted), Allowed the tools' names (hosted tools without a name
// are skipped), Raw the object for the echo.
func (r *reader) allowedTools(p *path) (ToolChoice, *Error) {
	tc := ToolChoice{Mode: ToolChoiceAuto, Allowed: []string{}}
	start := r.pos
	haveTools := false
	err := r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "mode":
			var m *string
			if m, err = r.optEnum(&kp, toolChoiceModes); m != nil {
				tc.Mode = *m
			}
		case "tools":
			if c := r.peek(); c != '[' {
				return errType(&kp, "an array", c)
			}
			haveTools = true
			r.open()
			for i := 0; r.elem(); i++ {
				ep := path{parent: &kp, index: i}
				var t Tool
				if err = r.allowedTool(&ep, &t); err != nil {
					return err
				}
				tc.Allowed = append(tc.Allowed, t.Name)
			}
		}
		return err
	})
	switch {
	case err != nil:
		return tc, err
	case !haveTools:
		return tc, errMissing(child(p, "tools"))
	}
	tc.Raw = compactCopy(r.data[start:r.pos])
	return tc, nil
}

// allowedTool reads one entry of allowed_tools.tools: {"type", "name"?}.
func (r *reader) allowedTool(p *path, t *Tool) *Error {
	haveType := false
	err := r.object(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "type":
			err = r.reqStr(&kp, &t.Type, &haveType)
		case "name":
			t.Name, err = r.strOrNull(&kp)
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case !haveType:
		return errMissing(child(p, "type"))
	case t.Type == ToolFunction && t.Name == "":
		return errMissing(child(p, "name"))
	}
	return nil
}

// strings reads an array of strings, or null (nil).
func (r *reader) strings(p *path) ([]string, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '[':
	default:
		return nil, errType(p, "an array of strings", c)
	}
	out := []string{}
	r.open()
	for i := 0; r.elem(); i++ {
		if c := r.peek(); c != '"' {
			return nil, errType(&path{parent: p, index: i}, "a string", c)
		}
		out = append(out, r.str())
	}
	return out, nil
}

// streamOptions reads stream_options {include_obfuscation?}, or null; it returns
// include_obfuscation.
func (r *reader) streamOptions(p *path) (*bool, *Error) {
	var v *bool
	_, err := r.optObject(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		if string(key) == "include_obfuscation" {
			v, err = r.optBool(&kp)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// metadata reads an object of strings (at most MaxMetadataKeys keys of at most
// MaxMetadataKeyLen characters, values of at most MaxMetadataValueLen characters), or null.
func (r *reader) metadata(p *path) (map[string]string, *Error) {
	if r.null() {
		return nil, nil
	}
	m := map[string]string{}
	err := r.object(p, func(key []byte) *Error {
		kp := path{parent: p, key: key, index: -1}
		c := r.peek()
		if c != '"' {
			return errType(&kp, "a string", c)
		}
		v := r.str()
		k := string(key)
		if n := utf8.RuneCountInString(k); n > MaxMetadataKeyLen {
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: p.String(),
				Message: fmt.Sprintf("Invalid 'metadata': key '%s' is too long. Expected keys with maximum length %d, but got a key with length %d instead.", clip(k), MaxMetadataKeyLen, n)}
		}
		if n := utf8.RuneCountInString(v); n > MaxMetadataValueLen {
			param := kp.String()
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: param,
				Message: fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", param, MaxMetadataValueLen, n)}
		}
		m[k] = v
		if len(m) > MaxMetadataKeys {
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: p.String(),
				Message: fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got more.", MaxMetadataKeys)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// reasoning reads {effort, summary} (strings or null; other members ignored), or null.
func (r *reader) reasoning(p *path) (*Reasoning, *Error) {
	rs := &Reasoning{}
	found, err := r.optObject(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "effort":
			rs.Effort, err = r.optStr(&kp)
		case "summary":
			rs.Summary, err = r.optStr(&kp)
		}
		return err
	})
	if !found || err != nil {
		return nil, err
	}
	return rs, nil
}

// textConfig reads {format: object or null (kept raw), verbosity: low|medium|high or null}, or
// null.
func (r *reader) textConfig(p *path) (*TextConfig, *Error) {
	tc := &TextConfig{}
	found, err := r.optObject(p, func(key []byte) (err *Error) {
		kp := path{parent: p, key: key, index: -1}
		switch string(key) {
		case "format":
			tc.Format, err = r.optRawObject(&kp)
		case "verbosity":
			var v *string
			if v, err = r.optEnum(&kp, verbosityValues); v != nil {
				tc.Verbosity = *v
			}
		}
		return err
	})
	if !found || err != nil {
		return nil, err
	}
	return tc, nil
}

// raw reads any value, checking its numbers (skipChecked), and returns a compacted copy of it.
func (r *reader) raw(p *path) (json.RawMessage, *Error) {
	start := r.pos
	if err := r.skipChecked(p); err != nil {
		return nil, err
	}
	return compactCopy(r.data[start:r.pos]), nil
}

// optRawObject reads an object kept verbatim (see raw), or null (nil).
func (r *reader) optRawObject(p *path) (json.RawMessage, *Error) {
	switch c := r.peek(); c {
	case 'n':
		r.token()
		return nil, nil
	case '{':
		return r.raw(p)
	default:
		return nil, errType(p, "an object", c)
	}
}

// keySet rejects a repeated member of a frame's top-level object: a repeated "type", "model"
// or "previous_response_id" would let two readers of the same frame see different requests.
// Top-level objects have few members, so a linear search is enough.
type keySet [][]byte // the keys alias the frame, which outlives the decoding

func (k *keySet) add(key []byte, noun string) *Error {
	for _, have := range *k {
		if string(have) == string(key) {
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: string(key),
				Message: fmt.Sprintf("Duplicate key '%s' in the %s: each top-level member may appear once.", clip(string(key)), noun)}
		}
	}
	*k = append(*k, key)
	return nil
}

// frame reads a frame's top-level object (r at its '{') with fn, rejecting repeated members.
func (r *reader) frame(fn memberFunc) *Error {
	var seen keySet
	return r.object(nil, func(key []byte) *Error {
		if err := seen.add(key, r.what()); err != nil {
			return err
		}
		return fn(key)
	})
}

// null consumes a null literal if one is next and reports whether it did.
func (r *reader) null() bool {
	if r.peek() == 'n' {
		r.token()
		return true
	}
	return false
}
