package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
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
//   - a value outside CreateBounds (a create's, and the input items of a response.append, which
//     are held to the create's bounds of input items): the bound's code, Param the value's path.
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
// DecodeClientEvent does not retain data: strings and raw values are copied. A frame of
// HeavyBytes or more is decoded in a heavy-work slot (CPUSlot); when ctx (the connection's)
// ends before one is free, the frame is not decoded and the error is ClientClosed.
func DecodeClientEvent(ctx context.Context, data []byte) (ClientEvent, *Error) {
	return decodeClientEvent(ctx, data, true)
}

// decodeClientEvent is DecodeClientEvent. A create is held to CreateBounds while it is decoded
// when fold is set, else by a second walk over data (checkBounds, the reference the tests
// compare with).
func decodeClientEvent(ctx context.Context, data []byte, fold bool) (ClientEvent, *Error) {
	release, cerr := HeavySlot(ctx, len(data))
	defer release()
	if cerr != nil {
		return ClientEvent{}, cerr
	}
	var ev ClientEvent
	var bounds *Error // the create's bound violation, when fold is set
	err := decodeText(data, "frame", true, func(d *dec) *Error {
		if d.kind() != '{' {
			return errSyntax
		}
		t, err := d.typed()
		if err != nil {
			return err
		}
		defer t.done()
		if !t.found {
			return t.missingType()
		}
		var seen keySet // the top-level members read so far
		if !t.sub {
			seen = keySet{[]byte("type")}
		}
		ev.Type = ClientEventType(t.typ)
		switch ev.Type {
		case EventCreate:
			t.startBounds(fold)
			ev.Create, err = t.create(seen)
			bounds = t.boundResult()
		case EventAppend: // its input items are held to the create's bounds of input items
			t.startBounds(fold)
			if err = t.append(&ev, seen); err == nil {
				err = t.boundResult()
			}
		case EventCancel, EventProcessed:
			err = t.responseIDOnly(&ev, seen)
		case EventSteer:
			if err = t.members(func([]byte) *Error { return nil }); err == nil {
				ev.Steer = bytes.Clone(data)
			}
		default:
			err = UnknownEventType(string(t.typ),
				"'response.create', 'response.append', 'response.cancel', 'response.processed', and 'response.steer'")
		}
		return err
	})
	switch {
	case err == nil && ev.Type == EventCreate:
		err = finishCreate(fold, bounds, data, ev.Create)
	case err == nil && ev.Type == EventAppend && !fold:
		err = checkBounds(data) // the reference: its input is at the create's "input"
	}
	switch {
	case err == nil:
	case err.Code == CodeInvalidJSON || ev.Type == EventSteer:
		ev = ClientEvent{}
	default:
		ev.Create = nil
	}
	return ev, err
}

// UnknownEventType is the unknown_event_type error (400, param "type") for the event type typ,
// listing the supported types. DecodeClientEvent returns it with ClientEvent.Type set to typ and
// lists the types of both shapes; an adapter can answer with the list of its own shape.
func UnknownEventType(typ, supported string) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeUnknownEventType, Param: "type",
		Message: fmt.Sprintf("Unknown event type '%s'. Supported types are: %s.", clip(typ), supported)}
}

// DecodeCreateParams decodes the body of POST /v1/responses: the same fields and errors as a
// response.create frame, without the "type" member (any "type" member is ignored). A body of
// HeavyBytes or more is decoded in a heavy-work slot (CPUSlot); when ctx (the request's) ends
// before one is free, the body is not decoded and the error is ClientClosed.
func DecodeCreateParams(ctx context.Context, data []byte) (*CreateParams, *Error) {
	return decodeCreateParams(ctx, data, true)
}

// decodeCreateParams is DecodeCreateParams, holding the body to CreateBounds as
// decodeClientEvent does (by checkBounds when fold is not set).
func decodeCreateParams(ctx context.Context, data []byte, fold bool) (*CreateParams, *Error) {
	release, cerr := HeavySlot(ctx, len(data))
	defer release()
	if cerr != nil {
		return nil, cerr
	}
	var cp *CreateParams
	var bounds *Error
	err := decodeText(data, "request body", true, func(d *dec) (err *Error) {
		if k := d.kind(); k != '{' {
			return errSyntax
		}
		d.open()
		d.startBounds(fold)
		cp, err = d.create(nil)
		bounds = d.boundResult()
		return err
	})
	if err == nil {
		err = finishCreate(fold, bounds, data, cp)
	}
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// finishCreate checks a decoded create, whose text is data, against CreateBounds and the rules
// of CreateFields: when fold is set, bounds is what the decoding found against CreateBounds,
// else data is walked again (checkBounds).
func finishCreate(fold bool, bounds *Error, data []byte, cp *CreateParams) *Error {
	err := bounds
	if !fold {
		err = checkBounds(data)
	}
	if err != nil {
		return err
	}
	return checkCreate(cp)
}

// create decodes the members of a create's top-level object, whose '{' has been read; seen
// holds the members already read.
func (d *dec) create(seen keySet) (*CreateParams, *Error) {
	cp := &CreateParams{}
	haveModel := false
	err := d.frame(seen, func(key []byte) (err *Error) {
		start := d.offset()
		defer func() {
			if err == nil {
				d.noteMember(key, start)
			}
		}()
		switch string(key) {
		case "type": // a request body's is ignored, whatever its kind; a frame's was judged by typed
			err = d.skip()
		case "model":
			cp.Model, err = d.strOrNull()
			haveModel = cp.Model != ""
		case "input":
			cp.Input, err = d.input()
		case "instructions":
			cp.Instructions, err = d.optStr()
		case "previous_response_id":
			cp.PreviousResponseID, err = d.optStr()
		case "tools":
			cp.Tools, err = d.tools()
		case "tool_choice":
			cp.ToolChoice, err = d.toolChoice()
		case "parallel_tool_calls":
			cp.ParallelToolCalls, err = d.optBool()
		case "max_output_tokens":
			cp.MaxOutputTokens, err = d.optInt()
		case "max_tool_calls":
			cp.MaxToolCalls, err = d.optInt()
		case "top_logprobs":
			cp.TopLogprobs, err = d.optInt()
		case "metadata":
			cp.Metadata, err = d.metadata()
		case "store":
			cp.Store, err = d.optBool()
		case "stream":
			var b *bool
			b, err = d.optBool()
			cp.Stream = b != nil && *b
		case "generate":
			cp.Generate, err = d.optBool()
		case "background":
			cp.Background, err = d.optBool()
		case "temperature":
			cp.Temperature, err = d.optFloat()
		case "top_p":
			cp.TopP, err = d.optFloat()
		case "presence_penalty":
			cp.PresencePenalty, err = d.optFloat()
		case "frequency_penalty":
			cp.FrequencyPenalty, err = d.optFloat()
		case "reasoning":
			cp.Reasoning, err = d.reasoning()
		case "text":
			cp.Text, err = d.textConfig()
		case "truncation":
			cp.Truncation, err = d.optEnum(truncationValues)
		case "user":
			cp.User, err = d.optStr()
		case "safety_identifier":
			cp.SafetyIdentifier, err = d.optStr()
		case "prompt_cache_key":
			cp.PromptCacheKey, err = d.optStr()
		case "service_tier":
			cp.ServiceTier, err = d.optStr()
		case "stream_id":
			if cp.StreamID, err = d.optStr(); err != nil { // not a string: a bad lane name
				err = CheckStreamID(new(""))
			}
		case "include":
			cp.Include, err = d.strings()
		case "stream_options":
			cp.IncludeObfuscation, err = d.streamOptions()
		case "prompt_cache_retention":
			var v *string
			if v, err = d.optStr(); v != nil && *v != "in-memory" && *v != "in_memory" {
				err = Errorf(400, CodeUnsupportedParameter, "prompt_cache_retention",
					"Unsupported value: 'prompt_cache_retention' '%s'; this server keeps its cache in memory only ('in-memory').", clip(*v))
			}
		case "event_id":
			err = d.eventID()
		case "conversation", "prompt", "context_management", "moderation", "prompt_cache_options":
			if !d.null() {
				err = errUnsupported(string(key))
			}
		default:
			// Rows of CreateFields without a case (client_metadata) are accepted
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
		return nil, errMissing("model")
	}
	return cp, nil
}

// append decodes the members of a response.append frame {response_id, input}; seen holds the
// members already read.
func (d *dec) append(ev *ClientEvent, seen keySet) *Error {
	haveInput := false
	err := d.frame(seen, func(key []byte) (err *Error) {
		switch string(key) {
		case "type": // skipped
		case "event_id":
			err = d.eventID()
		case "response_id":
			ev.ResponseID, err = d.strOrNull()
		case "input":
			switch k := d.kind(); k {
			case 'n':
				d.value()
			case '[':
				ev.Input, err = d.items()
				haveInput = true
			default:
				err = d.errType("an array of input items", k)
			}
		default:
			err = errUnknown(string(key))
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case ev.ResponseID == "":
		return errMissing("response_id")
	case !haveInput:
		return errMissing("input")
	}
	return nil
}

// responseIDOnly decodes the members of response.cancel and response.processed
// {response_id}; seen holds the members already read.
func (d *dec) responseIDOnly(ev *ClientEvent, seen keySet) *Error {
	err := d.frame(seen, func(key []byte) (err *Error) {
		switch string(key) {
		case "type": // skipped
		case "event_id":
			err = d.eventID()
		case "response_id":
			ev.ResponseID, err = d.strOrNull()
		default:
			err = errUnknown(string(key))
		}
		return err
	})
	if err == nil && ev.ResponseID == "" {
		return errMissing("response_id")
	}
	return err
}

// eventID reads a client event's event_id, the client's correlation id, which nothing uses: a
// string or null; another kind is invalid_type.
func (d *dec) eventID() *Error {
	switch k := d.kind(); k {
	case '"', 'n':
		if d.value() == nil {
			return errSyntax
		}
		return nil
	default:
		return d.errType("a string", k)
	}
}

// optEnum reads a string from values, or null (nil).
func (d *dec) optEnum(values []string) (*string, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '"':
		v, err := d.enum(values)
		if err != nil {
			return nil, err
		}
		return &v, nil
	default:
		return nil, d.errType("a string", k)
	}
}

// enum reads a string token that must be one of values; it returns the matching value
// (no allocation).
func (d *dec) enum(values []string) (string, *Error) {
	b := d.strBytes()
	for _, v := range values {
		if string(b) == v {
			return v, nil
		}
	}
	return "", errValue(d.param(), string(b), values)
}

// input reads a create's input: a string (one user message) or an array of items; null is
// omitted.
func (d *dec) input() ([]Item, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '"':
		s := d.strIn(inputNode, "")
		return []Item{{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: s}}}}, nil
	case '[':
		return d.items()
	default:
		return nil, d.errType("a string or an array of input items", k)
	}
}

// items reads an array of input items (the '[' peeked). The result is non-nil, also when empty.
func (d *dec) items() ([]Item, *Error) { return arrayOf(d, d.item) }

// arrayOf reads the array that is the next value (its '[' peeked) with read, one element each.
// The result is non-nil, also when empty.
func arrayOf[T any](d *dec, read func(*T) *Error) ([]T, *Error) {
	out := []T{}
	var full [][]T // chunks of arrayChunk elements read before out, in order
	err := d.array(func() *Error {
		if len(out) == arrayChunk {
			full = append(full, out)
			out = make([]T, 0, arrayChunk)
		}
		var zero T
		out = append(out, zero)
		return read(&out[len(out)-1])
	})
	if err != nil {
		return nil, err
	}
	if full == nil {
		return out, nil
	}
	all := make([]T, 0, len(full)*arrayChunk+len(out))
	for _, c := range full {
		all = appendYielding(all, c)
		runtime.Gosched()
	}
	return append(all, out...), nil
}

// arrayChunk is how many elements arrayOf grows one slice by before it starts another. A long
// array is gathered in chunks and joined once at the end, yielding the CPU between chunks. A
// slice copy cannot be preempted: growing one slice of a million items by append, or joining
// them in one copy, moved hundreds of MiB of pointers in one step that held a CPU for 150–200 ms
// while the GC marked, and every other request, /healthz included, waited for it.
const arrayChunk = 1024

// item reads one input item. An object without "type" but with "role" is a
// message ("easy message"); message, function_call and function_call_output are modelled; any
// other type is kept verbatim (compacted) in Raw with ID and Status taken from it when they are
// strings.
func (d *dec) item(it *Item) *Error {
	if k := d.kind(); k != '{' {
		return d.errType("an object", k)
	}
	t, err := d.typed()
	if err != nil {
		return err
	}
	defer t.done()
	switch typ := string(t.typ); {
	case !t.found && t.role, t.found && typ == ItemMessage:
		return t.message(it, typ)
	case !t.found:
		return t.missingType()
	case typ == ItemFunctionCall:
		return t.functionCall(it)
	case typ == ItemFunctionCallOutput:
		return t.functionCallOutput(it)
	}
	it.Type = string(t.typ)
	_, err = t.membersIn(itemNode, it.Type, func(key []byte) *Error {
		switch string(key) {
		case "id":
			if t.kind() == '"' {
				it.ID = t.str()
			}
		case "status":
			if t.kind() == '"' {
				it.Status = t.strIn(itemStatus, it.Type)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	it.Raw = t.raw()
	if it.Type == ItemReference && it.ID == "" {
		return t.missing("id")
	}
	return nil
}

// message reads the members of a message item whose "type" is typ ("" for none).
func (d *dec) message(it *Item, typ string) *Error {
	it.Type = ItemMessage
	var (
		text      string
		isString  bool
		haveParts bool
	)
	_, err := d.membersIn(itemNode, typ, func(key []byte) (err *Error) {
		switch string(key) {
		case "role":
			switch k := d.kind(); k {
			case 'n':
				d.value()
				it.Role = ""
			case '"':
				it.Role, err = d.enum(roleValues)
			default:
				err = d.errType("a string", k)
			}
		case "content":
			switch k := d.kind(); k {
			case 'n':
				d.value()
				isString, haveParts = false, false
			case '"':
				text = d.strIn(itemContent, typ)
				isString, haveParts = true, false
			case '[':
				it.Content, err = d.parts(itemContent)
				isString, haveParts = false, true
			default:
				err = d.errType("a string or an array of content parts", k)
			}
		case "id":
			it.ID, err = d.strOrNull()
		case "status":
			err = d.status(&it.Status)
		}
		return err
	})
	if err != nil {
		return err
	}
	if it.Role == "" {
		return d.missing("role")
	}
	switch {
	case isString:
		t := PartInputText
		if it.Role == RoleAssistant {
			t = PartOutputText
		}
		it.Content = []ContentPart{{Type: t, Text: text}}
	case !haveParts:
		return d.missing("content")
	}
	return nil
}

// status reads an item status (in_progress | completed | incomplete) or null.
func (d *dec) status(dst *string) *Error {
	s, err := d.optEnum(statusValues)
	if s != nil {
		*dst = *s
	} else {
		*dst = ""
	}
	return err
}

// reqStr reads a required string member: null leaves it missing.
func (d *dec) reqStr(dst *string, have *bool) *Error { return d.reqStrIn(nil, "", dst, have) }

// reqStrIn is reqStr for a member at node n of boundTree, in an object of type typ: a string
// is checked against n's rows (dec.strIn).
func (d *dec) reqStrIn(n *boundNode, typ string, dst *string, have *bool) *Error {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		*dst, *have = "", false
	case '"':
		*dst, *have = d.strIn(n, typ), true
	default:
		return d.errType("a string", k)
	}
	return nil
}

// required reads the members of an object at node n of boundTree, of type typ, with fn (see
// membersIn) and then reports the first of names whose flag in have is false as missing.
func (d *dec) required(n *boundNode, typ string, fn memberFunc, names []string, have ...*bool) *Error {
	if _, err := d.membersIn(n, typ, fn); err != nil {
		return err
	}
	for i, h := range have {
		if !*h {
			return d.missing(names[i])
		}
	}
	return nil
}

// functionCall reads the members of a function_call item.
func (d *dec) functionCall(it *Item) *Error {
	it.Type = ItemFunctionCall
	var haveCall, haveName, haveArgs bool
	return d.required(itemNode, ItemFunctionCall, func(key []byte) (err *Error) {
		switch string(key) {
		case "call_id":
			err = d.reqStrIn(itemCallID, ItemFunctionCall, &it.CallID, &haveCall)
		case "name":
			err = d.reqStrIn(itemName, ItemFunctionCall, &it.Name, &haveName)
		case "arguments":
			err = d.reqStr(&it.Arguments, &haveArgs)
		case "id":
			it.ID, err = d.strOrNull()
		case "status":
			err = d.status(&it.Status)
		}
		return err
	}, []string{"call_id", "name", "arguments"}, &haveCall, &haveName, &haveArgs)
}

// functionCallOutput reads the members of a function_call_output item. An array output is kept
// in OutputParts and its text parts are joined into Output.
func (d *dec) functionCallOutput(it *Item) *Error {
	it.Type = ItemFunctionCallOutput
	var haveCall, haveOutput bool
	return d.required(itemNode, ItemFunctionCallOutput, func(key []byte) (err *Error) {
		switch string(key) {
		case "call_id":
			err = d.reqStrIn(itemCallID, ItemFunctionCallOutput, &it.CallID, &haveCall)
		case "output":
			switch k := d.kind(); k {
			case 'n':
				d.value()
				it.Output, it.OutputParts, haveOutput = "", nil, false
			case '"':
				it.Output, it.OutputParts, haveOutput = d.strIn(itemOutput, ItemFunctionCallOutput), nil, true
			case '[':
				it.OutputParts, err = d.parts(itemOutput)
				it.Output, haveOutput = joinText(it.OutputParts), true
			default:
				err = d.errType("a string or an array of content parts", k)
			}
		case "id":
			it.ID, err = d.strOrNull()
		case "status":
			err = d.status(&it.Status)
		}
		return err
	}, []string{"call_id", "output"}, &haveCall, &haveOutput)
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

// parts reads an array of content parts (the '[' peeked) at node n of boundTree. The result is
// non-nil, also when empty.
func (d *dec) parts(n *boundNode) ([]ContentPart, *Error) {
	n = n.elem()
	return arrayOf(d, func(pt *ContentPart) *Error { return d.partIn(n, pt) })
}

// typedObject opens the next value as an object whose first "type" member chooses its shape
// (dec.typed): anything but an object is invalid_type, an object without a type is
// missing_required_parameter "type".
func (d *dec) typedObject() (typed, *Error) {
	if k := d.kind(); k != '{' {
		return typed{}, d.errType("an object", k)
	}
	t, err := d.typed()
	if err == nil && !t.found {
		err = t.missingType()
		t.done()
	}
	return t, err
}

// part reads one content part. input_text, output_text, summary_text and reasoning_text need
// "text", refusal needs "refusal" (strings); any other type (input_image, input_file, …) is
// kept in Raw.
func (d *dec) part(pt *ContentPart) *Error { return d.partIn(nil, pt) }

// partIn is part for a part at node n of boundTree.
func (d *dec) partIn(n *boundNode, pt *ContentPart) *Error {
	t, err := d.typedObject()
	if err != nil {
		return err
	}
	defer t.done()
	textKey := "text"
	switch string(t.typ) {
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
		pt.Type = string(t.typ)
		pt.Raw, err = t.rawRest(n, "")
		return err
	}
	haveText := false
	return t.required(n, "", func(key []byte) *Error {
		if string(key) == textKey {
			return t.reqStrIn(n.child(textKey), "", &pt.Text, &haveText)
		}
		return nil
	}, []string{textKey}, &haveText)
}

// missingType is missing_required_parameter for the "type" of an object without one.
func (t *typed) missingType() *Error {
	return errMissing(string(joinParam([]byte(t.prefix), "type")))
}

// rawRest reads the rest of t's object, at node n of boundTree and of type typ, checking its
// numbers (and its members against n, see membersIn), and returns a compacted copy of the
// whole object.
func (t *typed) rawRest(n *boundNode, typ string) (json.RawMessage, *Error) {
	if _, err := t.membersIn(n, typ, nil); err != nil {
		return nil, err
	}
	return t.raw(), nil
}

// tools reads the tools array, or null.
func (d *dec) tools() ([]Tool, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '[':
	default:
		return nil, d.errType("an array of tools", k)
	}
	return arrayOf(d, d.tool)
}

// tool reads one tool: a function tool is modelled, other types are kept in Raw.
func (d *dec) tool(tl *Tool) *Error {
	t, err := d.typedObject()
	if err != nil {
		return err
	}
	defer t.done()
	tl.Type = string(t.typ)
	if tl.Type != ToolFunction {
		tl.Raw, err = t.rawRest(toolNode, tl.Type)
		return err
	}
	haveName := false
	return t.required(toolNode, ToolFunction, func(key []byte) (err *Error) {
		switch string(key) {
		case "name":
			err = t.reqStrIn(toolName, ToolFunction, &tl.Name, &haveName)
		case "description":
			tl.Description, err = t.optStr()
		case "parameters":
			tl.Parameters, err = t.optRawObject()
		case "strict":
			tl.Strict, err = t.optBool()
		}
		return err
	}, []string{"name"}, &haveName)
}

// toolChoice reads tool_choice: a mode string, {"type":"function","name":…}, another object
// (kept in Raw), or null (zero).
func (d *dec) toolChoice() (ToolChoice, *Error) {
	var tc ToolChoice
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return tc, nil
	case '"':
		var err *Error
		tc.Mode, err = d.enum(toolChoiceModes)
		return tc, err
	case '{':
	default:
		return tc, d.errType("a string or an object", k)
	}
	t, err := d.typedObject()
	if err != nil {
		return tc, err
	}
	defer t.done()
	switch string(t.typ) {
	case ToolChoiceAllowed:
		return t.allowedTools()
	case ToolFunction:
	default:
		tc.Raw, err = t.rawRest(nil, "")
		return tc, err
	}
	haveName := false
	err = t.members(func(key []byte) *Error {
		if string(key) == "name" {
			return t.reqStr(&tc.Name, &haveName)
		}
		return nil
	})
	if err == nil && (!haveName || tc.Name == "") {
		return tc, t.missing("name")
	}
	return tc, err
}

// allowedTools reads the members of {"type":"allowed_tools","mode":…,"tools":[{"type":
// "function","name":…}]}: Mode is the mode ("auto" when omitted), Allowed the tools' names
// (hosted tools without a name are skipped), Raw the object for the echo.
func (t *typed) allowedTools() (ToolChoice, *Error) {
	tc := ToolChoice{Mode: ToolChoiceAuto, Allowed: []string{}}
	haveTools := false
	err := t.required(nil, "", func(key []byte) (err *Error) {
		switch string(key) {
		case "mode":
			var m *string
			if m, err = t.optEnum(toolChoiceModes); m != nil {
				tc.Mode = *m
			}
		case "tools":
			if k := t.kind(); k != '[' {
				return t.errType("an array", k)
			}
			haveTools = true
			err = t.array(func() *Error {
				var tl Tool
				if err := t.allowedTool(&tl); err != nil {
					return err
				}
				tc.Allowed = append(tc.Allowed, tl.Name)
				return nil
			})
		}
		return err
	}, []string{"tools"}, &haveTools)
	if err != nil {
		return tc, err
	}
	tc.Raw = t.raw()
	return tc, nil
}

// allowedTool reads one entry of allowed_tools.tools: {"type", "name"?}.
func (d *dec) allowedTool(t *Tool) *Error {
	haveType := false
	err := d.object(func(key []byte) (err *Error) {
		switch string(key) {
		case "type":
			err = d.reqStr(&t.Type, &haveType)
		case "name":
			t.Name, err = d.strOrNull()
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case !haveType:
		return d.missing("type")
	case t.Type == ToolFunction && t.Name == "":
		return d.missing("name")
	}
	return nil
}

// strings reads an array of strings, or null (nil).
func (d *dec) strings() ([]string, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '[':
	default:
		return nil, d.errType("an array of strings", k)
	}
	return arrayOf(d, func(s *string) *Error {
		if k := d.kind(); k != '"' {
			return d.errType("a string", k)
		}
		*s = d.str()
		return nil
	})
}

// streamOptions reads stream_options {include_obfuscation?}, or null; it returns
// include_obfuscation.
func (d *dec) streamOptions() (*bool, *Error) {
	var v *bool
	_, err := d.optObject(func(key []byte) (err *Error) {
		if string(key) == "include_obfuscation" {
			v, err = d.optBool()
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
func (d *dec) metadata() (map[string]string, *Error) {
	if d.null() {
		return nil, nil
	}
	m := map[string]string{}
	err := d.object(func(key []byte) *Error {
		if k := d.kind(); k != '"' {
			return d.errType("a string", k)
		}
		v := d.str()
		k := string(key)
		if n := utf8.RuneCountInString(k); n > MaxMetadataKeyLen {
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: d.parent(),
				Message: fmt.Sprintf("Invalid 'metadata': key '%s' is too long. Expected keys with maximum length %d, but got a key with length %d instead.", clip(k), MaxMetadataKeyLen, n)}
		}
		if n := utf8.RuneCountInString(v); n > MaxMetadataValueLen {
			param := d.param()
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: param,
				Message: fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", param, MaxMetadataValueLen, n)}
		}
		m[k] = v
		if len(m) > MaxMetadataKeys {
			return &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidValue, Param: d.parent(),
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
func (d *dec) reasoning() (*Reasoning, *Error) {
	rs := &Reasoning{}
	found, err := d.optObject(func(key []byte) (err *Error) {
		switch string(key) {
		case "effort":
			rs.Effort, err = d.optStr()
		case "summary":
			rs.Summary, err = d.optStr()
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
func (d *dec) textConfig() (*TextConfig, *Error) {
	tc := &TextConfig{}
	found, err := d.optObject(func(key []byte) (err *Error) {
		switch string(key) {
		case "format":
			tc.Format, err = d.optRawObject()
		case "verbosity":
			var v *string
			if v, err = d.optEnum(verbosityValues); v != nil {
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

// raw reads any value, checking its numbers (skip), and returns a compacted copy of it.
func (d *dec) raw() (json.RawMessage, *Error) {
	d.kind()
	start := int(d.d.InputOffset()) + valueStart(d.d.UnreadBuffer())
	if err := d.skip(); err != nil {
		return nil, err
	}
	return compactCopy(d.data[start:d.d.InputOffset()]), nil
}

// optRawObject reads an object kept verbatim (see raw), or null (nil).
func (d *dec) optRawObject() (json.RawMessage, *Error) {
	switch k := d.kind(); k {
	case 'n':
		d.value()
		return nil, nil
	case '{':
		return d.raw()
	default:
		return nil, d.errType("an object", k)
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

// frame reads the members of a frame's top-level object (its '{' read) with fn, rejecting
// repeated members; seen holds the members already read.
func (d *dec) frame(seen keySet, fn memberFunc) *Error {
	return d.members(func(key []byte) *Error {
		if err := seen.add(key, d.noun); err != nil {
			return err
		}
		return fn(key)
	})
}
