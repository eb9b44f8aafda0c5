package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendEvent appends the JSON encoding of ev (one line, no trailing newline) to dst and
// returns the extended buffer. The keys are those of the Responses API for ev.Type, in that
// order, after "type", "sequence_number" (every event but "error" carries
// sequence_number, also when 0) and "stream_id" (only when ev.StreamID is not ""):
//
//   - response.created, .in_progress, .completed, .incomplete, .failed: response (its
//     settings members copied from ev.Settings when set).
//   - response.output_item.added / .done: output_index, item.
//   - response.content_part.added / .done: item_id, output_index, content_index, part (a nil
//     Part encodes as an empty output_text part).
//   - response.output_text.delta: item_id, output_index, content_index, delta, logprobs:[].
//   - response.output_text.done: item_id, output_index, content_index, text, logprobs:[].
//   - response.function_call_arguments.delta: item_id, output_index, delta.
//   - response.function_call_arguments.done: item_id, output_index, name, arguments.
//   - response.done: response_id, pending_call_ids (always an array), output (always an
//     array), usage (null when nil).
//   - response.steer.failed: steer (ev.Steer verbatim, compacted; {} when nil), error
//     {type, code, message} from ev.Error.
//   - error: the envelope of AppendError(ev.Error), without sequence_number.
//
// Any other type encodes as {"type","sequence_number"}. Strings are escaped as encoding/json
// does with SetEscapeHTML(false): valid UTF-8 out, control characters, U+2028 and U+2029
// escaped, <>& left alone. The text deltas allocate nothing when dst has room.
func AppendEvent(dst []byte, ev *Event) []byte {
	if ev.Type == EventError {
		e := ev.Error
		if e == nil {
			e = &Error{Status: 500, Type: TypeServer, Code: CodeServerError, Message: "The server had an error."}
		}
		return AppendError(dst, e)
	}
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, string(ev.Type))
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(ev.SequenceNumber), 10)
	if ev.StreamID != "" {
		dst = append(dst, `,"stream_id":`...)
		dst = appendString(dst, ev.StreamID)
	}
	switch ev.Type {
	case EventOutputTextDelta:
		dst = appendItemRef(dst, ev, true)
		dst = append(dst, `,"delta":`...)
		dst = appendString(dst, ev.Delta)
		dst = append(dst, `,"logprobs":[]`...)
	case EventArgumentsDelta:
		dst = appendItemRef(dst, ev, false)
		dst = append(dst, `,"delta":`...)
		dst = appendString(dst, ev.Delta)
	case EventOutputTextDone:
		dst = appendItemRef(dst, ev, true)
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, `,"logprobs":[]`...)
	case EventArgumentsDone:
		dst = appendItemRef(dst, ev, false)
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, ev.Name)
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, ev.Arguments)
	case EventContentPartAdded, EventContentPartDone:
		dst = appendItemRef(dst, ev, true)
		dst = append(dst, `,"part":`...)
		if ev.Part == nil {
			dst = appendPart(dst, &ContentPart{Type: PartOutputText})
		} else {
			dst = appendPart(dst, ev.Part)
		}
	case EventOutputItemAdded, EventOutputItemDone:
		dst = append(dst, `,"output_index":`...)
		dst = strconv.AppendInt(dst, int64(ev.OutputIndex), 10)
		dst = append(dst, `,"item":`...)
		if ev.Item == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendItem(dst, ev.Item)
		}
	case EventCreated, EventInProgress, EventCompleted, EventIncomplete, EventFailed:
		dst = append(dst, `,"response":`...)
		if ev.Response == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendResponse(dst, ev.Response, ev.Settings)
		}
		if ev.Type == EventCreated {
			dst = appendContinuation(dst, ev.Continuation)
		}
	case EventDone:
		dst = append(dst, `,"response_id":`...)
		dst = appendString(dst, ev.ResponseID)
		dst = append(dst, `,"pending_call_ids":[`...)
		for i, id := range ev.PendingCallIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, id)
		}
		dst = append(dst, `],"output":`...)
		dst = appendItems(dst, ev.Output)
		dst = append(dst, `,"usage":`...)
		if ev.Usage == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendUsage(dst, ev.Usage)
		}
	case EventSteerAccepted:
		dst = appendSteer(dst, ev.Steer)
	case EventSteerPending:
		dst = append(dst, `,"reason":`...)
		dst = appendString(dst, SteerWaitingForInput)
		dst = append(dst, `,"required_input":[`...)
		for i, id := range ev.PendingCallIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"function_call_output","call_id":`...)
			dst = appendString(dst, id)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		dst = appendSteer(dst, ev.Steer)
	case EventSteerFailed:
		dst = append(dst, `,"steer":`...)
		if len(ev.Steer) == 0 {
			dst = append(dst, "{}"...)
		} else {
			dst = appendRaw(dst, ev.Steer)
		}
		dst = append(dst, `,"error":`...)
		e := ev.Error
		if e == nil {
			e = &Error{Type: TypeInvalidRequest, Code: CodeSteeringNotSupported, Message: "Steering is not supported for this response."}
		}
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, errorType(e))
		dst = append(dst, `,"code":`...)
		dst = appendString(dst, e.Code)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, e.Message)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendSteer appends the steer object (verbatim, compacted; {} when empty).
func appendSteer(dst []byte, steer json.RawMessage) []byte {
	dst = append(dst, `,"steer":`...)
	if len(steer) == 0 {
		return append(dst, "{}"...)
	}
	return appendRaw(dst, steer)
}

// appendItemRef appends item_id, output_index and (with content) content_index.
func appendItemRef(dst []byte, ev *Event, content bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = appendString(dst, ev.ItemID)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(ev.OutputIndex), 10)
	if content {
		dst = append(dst, `,"content_index":`...)
		dst = strconv.AppendInt(dst, int64(ev.ContentIndex), 10)
	}
	return dst
}

// AppendError appends the WebSocket error envelope of e:
// {"type":"error","status":N,"error":{"type","code","message","param"}}. code is always a
// string; param is null when e.Param is "". A zero Status encodes as 400 (500 for
// server_error), an empty Type as invalid_request_error (server_error for 5xx).
func AppendError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"type":"error","status":`...)
	dst = strconv.AppendInt(dst, int64(errorStatus(e)), 10)
	if e.StreamID != "" {
		dst = append(dst, `,"stream_id":`...)
		dst = appendString(dst, e.StreamID)
	}
	dst = append(dst, `,"error":{"type":`...)
	dst = appendString(dst, errorType(e))
	dst = append(dst, `,"code":`...)
	dst = appendString(dst, e.Code)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"param":`...)
	dst = appendParam(dst, e.Param)
	return append(dst, "}}"...)
}

// AppendHTTPError appends the HTTP error body of e: {"error":{"message","type","param","code"}}
// (send it with status e.Status; defaults as in AppendError).
func AppendHTTPError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, errorType(e))
	dst = append(dst, `,"param":`...)
	dst = appendParam(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendString(dst, e.Code)
	return append(dst, "}}"...)
}

// HTTPStatus returns the HTTP status of e: e.Status, or the default of AppendError when 0.
func (e *Error) HTTPStatus() int { return errorStatus(e) }

func errorStatus(e *Error) int {
	switch {
	case e.Status != 0:
		return e.Status
	case e.Type == TypeServer || e.Code == CodeServerError:
		return 500
	}
	return 400
}

func errorType(e *Error) string {
	switch {
	case e.Type != "":
		return e.Type
	case e.Status >= 500 || e.Code == CodeServerError:
		return TypeServer
	}
	return TypeInvalidRequest
}

func appendParam(dst []byte, param string) []byte {
	if param == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, param)
}

// appendItems appends a JSON array of items ([] when empty).
func appendItems(dst []byte, items []Item) []byte { return appendArray(dst, items, appendItem) }

// appendArray appends xs as a JSON array ([] when empty), each element by appendOne.
func appendArray[T any](dst []byte, xs []T, appendOne func([]byte, *T) []byte) []byte {
	dst = append(dst, '[')
	for i := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendOne(dst, &xs[i])
	}
	return append(dst, ']')
}

// appendItem appends an item in the wire shape of its type.
func appendItem(dst []byte, it *Item) []byte {
	switch it.Type {
	case ItemMessage, ItemFunctionCall, ItemFunctionCallOutput:
	default:
		if len(it.Raw) > 0 {
			return appendRaw(dst, it.Raw)
		}
	}
	dst = append(dst, '{')
	if it.ID != "" {
		dst = append(dst, `"id":`...)
		dst = appendString(dst, it.ID)
		dst = append(dst, ',')
	}
	dst = append(dst, `"type":`...)
	dst = appendString(dst, it.Type)
	if it.Status != "" {
		dst = append(dst, `,"status":`...)
		dst = appendString(dst, it.Status)
	}
	switch it.Type {
	case ItemMessage:
		dst = append(dst, `,"content":`...)
		dst = appendParts(dst, it.Content)
		dst = append(dst, `,"role":`...)
		dst = appendString(dst, it.Role)
	case ItemFunctionCall:
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, it.Arguments)
		dst = append(dst, `,"call_id":`...)
		dst = appendString(dst, it.CallID)
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, it.Name)
	case ItemFunctionCallOutput:
		dst = append(dst, `,"call_id":`...)
		dst = appendString(dst, it.CallID)
		dst = append(dst, `,"output":`...)
		if it.OutputParts != nil {
			dst = appendParts(dst, it.OutputParts)
		} else {
			dst = appendString(dst, it.Output)
		}
	}
	return append(dst, '}')
}

// appendParts appends a JSON array of content parts ([] when empty).
func appendParts(dst []byte, parts []ContentPart) []byte {
	dst = append(dst, '[')
	for i := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendPart(dst, &parts[i])
	}
	return append(dst, ']')
}

// appendPart appends a content part; output_text always carries annotations:[] and logprobs:[].
func appendPart(dst []byte, p *ContentPart) []byte {
	switch p.Type {
	case PartOutputText:
		dst = append(dst, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
		dst = appendString(dst, p.Text)
	case PartRefusal:
		dst = append(dst, `{"type":"refusal","refusal":`...)
		dst = appendString(dst, p.Text)
	case PartInputText, PartSummary, PartReasoning:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, p.Type)
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, p.Text)
	default:
		if len(p.Raw) > 0 {
			return appendRaw(dst, p.Raw)
		}
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, p.Type)
	}
	return append(dst, '}')
}

// appendTool appends a tool: a function tool with description, parameters and strict always
// present (null when unset); other tools verbatim.
func appendTool(dst []byte, t *Tool) []byte {
	if t.Type != ToolFunction && len(t.Raw) > 0 {
		return appendRaw(dst, t.Raw)
	}
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, t.Type)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, t.Name)
	dst = append(dst, `,"description":`...)
	dst = appendOptString(dst, t.Description)
	dst = append(dst, `,"parameters":`...)
	if len(t.Parameters) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = appendRaw(dst, t.Parameters)
	}
	dst = append(dst, `,"strict":`...)
	switch {
	case t.Strict == nil:
		dst = append(dst, "null"...)
	case *t.Strict:
		dst = append(dst, "true"...)
	default:
		dst = append(dst, "false"...)
	}
	return append(dst, '}')
}

// appendToolChoice appends the string mode, the function object, or Raw.
func appendToolChoice(dst []byte, c *ToolChoice) []byte {
	switch {
	case c.Name != "":
		dst = append(dst, `{"type":"function","name":`...)
		dst = appendString(dst, c.Name)
		return append(dst, '}')
	case len(c.Raw) > 0:
		return appendRaw(dst, c.Raw)
	case c.Mode == "":
		return append(dst, `"auto"`...)
	}
	return appendString(dst, c.Mode)
}

// appendTextConfig appends {format, verbosity} with the defaults {"type":"text"} and "medium".
func appendTextConfig(dst []byte, t *TextConfig) []byte {
	dst = append(dst, `{"format":`...)
	if len(t.Format) == 0 {
		dst = append(dst, `{"type":"text"}`...)
	} else {
		dst = appendRaw(dst, t.Format)
	}
	dst = append(dst, `,"verbosity":`...)
	if t.Verbosity == "" {
		dst = append(dst, `"medium"`...)
	} else {
		dst = appendString(dst, t.Verbosity)
	}
	return append(dst, '}')
}

// appendUsage appends a usage object with every key.
func appendUsage(dst []byte, u *Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.InputTokens), 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.InputTokensDetails.CachedTokens), 10)
	dst = append(dst, `,"cache_write_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.InputTokensDetails.CacheWriteTokens), 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.OutputTokens), 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.OutputTokensDetails.ReasoningTokens), 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.TotalTokens), 10)
	return append(dst, '}')
}

// appendResponse appends a Response with every ResponseResource key, in the
// order of the struct: nil pointers are null, nil Output and Tools are [], nil Metadata is {},
// an empty Object is "response", an empty ServiceTier "auto", an empty Truncation "disabled".
// The settings members (settingMembers) are copied from s when it is not nil, encoded
// otherwise.
func appendResponse(dst []byte, r *Response, s *Settings) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"object":`...)
	if r.Object == "" {
		dst = append(dst, `"response"`...)
	} else {
		dst = appendString(dst, r.Object)
	}
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, r.CreatedAt, 10)
	dst = append(dst, `,"completed_at":`...)
	if r.CompletedAt == nil {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, *r.CompletedAt, 10)
	}
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, r.Status)
	dst = append(dst, `,"background":`...)
	dst = strconv.AppendBool(dst, r.Background)
	dst = append(dst, `,"error":`...)
	if r.Error == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"code":`...)
		dst = appendString(dst, r.Error.Code)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, r.Error.Message)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"incomplete_details":`...)
	if r.IncompleteDetails == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"reason":`...)
		dst = appendString(dst, r.IncompleteDetails.Reason)
		dst = append(dst, '}')
	}
	dst = s.appendMember(dst, r, settingInstructions)
	dst = s.appendMember(dst, r, settingMaxOutputTokens)
	dst = s.appendMember(dst, r, settingMaxToolCalls)
	dst = s.appendMember(dst, r, settingModel)
	dst = append(dst, `,"output":`...)
	dst = appendItems(dst, r.Output)
	dst = s.appendMember(dst, r, settingParallelToolCalls)
	dst = append(dst, `,"previous_response_id":`...)
	dst = appendOptString(dst, r.PreviousResponseID)
	dst = append(dst, `,"prompt_cache_key":`...)
	dst = appendOptString(dst, r.PromptCacheKey)
	dst = s.appendMember(dst, r, settingReasoning)
	dst = append(dst, `,"safety_identifier":`...)
	dst = appendOptString(dst, r.SafetyIdentifier)
	dst = append(dst, `,"service_tier":`...)
	if r.ServiceTier == "" {
		dst = append(dst, `"auto"`...)
	} else {
		dst = appendString(dst, r.ServiceTier)
	}
	dst = append(dst, `,"store":`...)
	dst = strconv.AppendBool(dst, r.Store)
	dst = s.appendMember(dst, r, settingTemperature)
	dst = s.appendMember(dst, r, settingText)
	dst = s.appendMember(dst, r, settingToolChoice)
	dst = s.appendMember(dst, r, settingTools)
	dst = append(dst, `,"top_logprobs":`...)
	dst = strconv.AppendInt(dst, int64(r.TopLogprobs), 10)
	dst = s.appendMember(dst, r, settingTopP)
	dst = s.appendMember(dst, r, settingPresencePenalty)
	dst = s.appendMember(dst, r, settingFrequencyPenalty)
	dst = s.appendMember(dst, r, settingTruncation)
	dst = append(dst, `,"usage":`...)
	if r.Usage == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendUsage(dst, r.Usage)
	}
	dst = append(dst, `,"user":`...)
	dst = appendOptString(dst, r.User)
	dst = s.appendMember(dst, r, settingMetadata)
	return append(dst, '}')
}

// appendMetadata appends m as a JSON object, keys sorted ({} when nil).
func appendMetadata(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *s)
}

func appendOptInt(dst []byte, n *int) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(*n), 10)
}

// appendFloat appends f as encoding/json does; NaN and ±Inf (not representable) become null.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendRaw appends a raw JSON value compacted (so SSE data stays on one line); an invalid
// value becomes null.
func appendRaw(dst []byte, raw []byte) []byte {
	if len(raw) >= HeavyBytes {
		dst = growYielding(dst, len(raw)) // json.Compact would grow it by copying it whole
	}
	n := len(dst)
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return append(buf.Bytes()[:n], "null"...)
	}
	return buf.Bytes()
}

const hexDigits = "0123456789abcdef"

// safeASCII[c] is true for ASCII bytes that need no escaping in a JSON string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendRun is the longest run of plain characters appendString copies at once: a copy is a
// step the scheduler cannot preempt, and a 24 MiB tool description copied in one held a CPU
// for tens of milliseconds.
const appendRun = 256 << 10

// appendString appends s as a JSON string, escaping like encoding/json with
// SetEscapeHTML(false): '"', '\\', control characters (\b \f \n \r \t short forms, others
// \u00XX), U+2028 and U+2029; invalid UTF-8 becomes \ufffd.
func appendString(dst []byte, s string) []byte {
	if len(s) >= HeavyBytes {
		dst = growYielding(dst, len(s)+len(s)/8+2) // room for the string and some escapes
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				if i-start == appendRun {
					dst = append(dst, s[start:i]...)
					start = i
				}
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendSettings appends the settings of r that shape its sampling, as one JSON object in
// this order: model, instructions, tools, tool_choice, parallel_tool_calls, reasoning, text,
// temperature, top_p, presence_penalty, frequency_penalty, max_output_tokens,
// max_tool_calls, truncation, metadata (keys sorted). Each member is encoded as in the
// Response object (AppendJSON), so two Responses with equal settings encode to equal bytes:
// a hot-path continuation compares its own with its parent's.
func AppendSettings(dst []byte, r *Response) []byte { return appendSettings(dst, r, nil) }

// appendSettings is AppendSettings; when at is not nil it records where each member (its
// `"name":value`, in settingMembers order) lies in dst, relative to the object's '{'.
func appendSettings(dst []byte, r *Response, at *[numSettings][2]int) []byte {
	base := len(dst)
	dst = append(dst, '{')
	for i := range settingMembers {
		if i > 0 {
			dst = append(dst, ',')
		}
		start := len(dst)
		dst = append(dst, settingMembers[i].name...)
		dst = settingMembers[i].value(dst, r)
		if at != nil {
			at[i] = [2]int{start - base, len(dst) - base}
		}
	}
	return append(dst, '}')
}

// Settings is the encoding of a Response's settings (AppendSettings) made once, so that the
// events of a turn copy those members instead of encoding them again (Event.Settings): the
// tools, instructions, text format and metadata a client sends are the bulk of a Response
// that has little output yet. Build it with EncodeSettings; it is immutable, and safe to
// share between goroutines.
type Settings struct {
	key []byte
	at  [numSettings][2]int // key[at[i][0]:at[i][1]] is member i: `"name":value`
}

// EncodeSettings encodes the settings of r. The result stands for every Response with the
// same settings members: r itself, a copy made by Finish, or a Response of another request
// whose settings key (Key) is equal.
func EncodeSettings(r *Response) *Settings {
	s := new(Settings)
	s.key = appendSettings(nil, r, &s.at)
	return s
}

// Key returns the settings key: the bytes AppendSettings appends for the Response s was
// encoded from. The caller must not modify them.
func (s *Settings) Key() []byte { return s.key }

// appendMember appends ',' and setting i of r (`"name":value`): copied from s, or encoded
// from r when s is nil.
func (s *Settings) appendMember(dst []byte, r *Response, i int) []byte {
	dst = append(dst, ',')
	if s == nil {
		dst = append(dst, settingMembers[i].name...)
		return settingMembers[i].value(dst, r)
	}
	return append(dst, s.key[s.at[i][0]:s.at[i][1]]...)
}

// The settings members, indexes of settingMembers in the order of AppendSettings.
const (
	settingModel = iota
	settingInstructions
	settingTools
	settingToolChoice
	settingParallelToolCalls
	settingReasoning
	settingText
	settingTemperature
	settingTopP
	settingPresencePenalty
	settingFrequencyPenalty
	settingMaxOutputTokens
	settingMaxToolCalls
	settingTruncation
	settingMetadata
	numSettings
)

// settingMembers are the settings members of a Response: the one place each is encoded, for
// the settings key and for the Response object alike. name is the member's `"name":`.
var settingMembers = [numSettings]struct {
	name  string
	value func(dst []byte, r *Response) []byte
}{
	settingModel:             {`"model":`, func(dst []byte, r *Response) []byte { return appendString(dst, r.Model) }},
	settingInstructions:      {`"instructions":`, func(dst []byte, r *Response) []byte { return appendOptString(dst, r.Instructions) }},
	settingTools:             {`"tools":`, func(dst []byte, r *Response) []byte { return appendTools(dst, r.Tools) }},
	settingToolChoice:        {`"tool_choice":`, func(dst []byte, r *Response) []byte { return appendToolChoice(dst, &r.ToolChoice) }},
	settingParallelToolCalls: {`"parallel_tool_calls":`, func(dst []byte, r *Response) []byte { return strconv.AppendBool(dst, r.ParallelToolCalls) }},
	settingReasoning:         {`"reasoning":`, func(dst []byte, r *Response) []byte { return appendReasoning(dst, &r.Reasoning) }},
	settingText:              {`"text":`, func(dst []byte, r *Response) []byte { return appendTextConfig(dst, &r.Text) }},
	settingTemperature:       {`"temperature":`, func(dst []byte, r *Response) []byte { return appendFloat(dst, r.Temperature) }},
	settingTopP:              {`"top_p":`, func(dst []byte, r *Response) []byte { return appendFloat(dst, r.TopP) }},
	settingPresencePenalty:   {`"presence_penalty":`, func(dst []byte, r *Response) []byte { return appendFloat(dst, r.PresencePenalty) }},
	settingFrequencyPenalty:  {`"frequency_penalty":`, func(dst []byte, r *Response) []byte { return appendFloat(dst, r.FrequencyPenalty) }},
	settingMaxOutputTokens:   {`"max_output_tokens":`, func(dst []byte, r *Response) []byte { return appendOptInt(dst, r.MaxOutputTokens) }},
	settingMaxToolCalls:      {`"max_tool_calls":`, func(dst []byte, r *Response) []byte { return appendOptInt(dst, r.MaxToolCalls) }},
	settingTruncation:        {`"truncation":`, func(dst []byte, r *Response) []byte { return appendTruncation(dst, r.Truncation) }},
	settingMetadata:          {`"metadata":`, func(dst []byte, r *Response) []byte { return appendMetadata(dst, r.Metadata) }},
}

// appendTools appends tools as a JSON array ([] when nil).
func appendTools(dst []byte, tools []Tool) []byte { return appendArray(dst, tools, appendTool) }

// appendReasoning appends the reasoning object, its unset members null.
func appendReasoning(dst []byte, r *Reasoning) []byte {
	dst = append(dst, `{"effort":`...)
	dst = appendOptString(dst, r.Effort)
	dst = append(dst, `,"summary":`...)
	dst = appendOptString(dst, r.Summary)
	return append(dst, '}')
}

// appendTruncation appends the truncation strategy, "disabled" when empty.
func appendTruncation(dst []byte, t string) []byte {
	if t == "" {
		return append(dst, `"disabled"`...)
	}
	return appendString(dst, t)
}
