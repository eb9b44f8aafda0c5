package protocol

import (
	"fmt"
	"strings"
)

// BoundExample is a create body (POST shape, without "type") that violates one row of
// CreateBounds and nothing else, with the error it must get: tests send every example over
// every transport, and a test fails when a row has no example.
type BoundExample struct {
	Row   string // the row's Param
	Body  string
	Code  string
	Param string // the error's param
}

// BoundExamples returns one example per row of CreateBounds (a few rows get two: below and
// above). Bodies over text limits are large (up to 32 MiB).
func BoundExamples() []BoundExample {
	long := func(n int) string { return `"` + strings.Repeat("a", n) + `"` }
	body := func(members string) string { return `{"model":"sim","input":"hi",` + members + `}` }
	item := func(it string) string { return `{"model":"sim","input":[` + it + `]}` }
	user := func(part string) string {
		return item(`{"type":"message","role":"user","content":[` + part + `]}`)
	}
	out := func(output string) string {
		return item(`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":` + output + `}`)
	}
	fn := `"tools":[{"type":"function","name":"get_time"}]`
	return []BoundExample{
		{"max_output_tokens", body(`"max_output_tokens":1`), CodeIntegerBelowMin, "max_output_tokens"},
		{"max_tool_calls", body(`"max_tool_calls":0`), CodeIntegerBelowMin, "max_tool_calls"},
		{"top_logprobs", body(`"top_logprobs":-1`), CodeIntegerBelowMin, "top_logprobs"},
		{"top_logprobs", body(`"top_logprobs":21`), CodeIntegerAboveMax, "top_logprobs"},
		{"temperature", body(`"temperature":2.5`), CodeDecimalAboveMax, "temperature"},
		{"temperature", body(`"temperature":-0.1`), CodeDecimalBelowMin, "temperature"},
		{"top_p", body(`"top_p":1.01`), CodeDecimalAboveMax, "top_p"},
		{"presence_penalty", body(`"presence_penalty":-2.5`), CodeDecimalBelowMin, "presence_penalty"},
		{"frequency_penalty", body(`"frequency_penalty":3`), CodeDecimalAboveMax, "frequency_penalty"},
		{"reasoning.effort", body(`"reasoning":{"effort":"extreme"}`), CodeInvalidValue, "reasoning.effort"},
		{"reasoning.summary", body(`"reasoning":{"summary":"verbose"}`), CodeInvalidValue, "reasoning.summary"},
		{"text.verbosity", body(`"text":{"verbosity":"loud"}`), CodeInvalidValue, "text.verbosity"},
		{"text.format.type", body(`"text":{"format":{"type":"yaml"}}`), CodeInvalidValue, "text.format.type"},
		{"text.format.name", body(`"text":{"format":{"type":"json_schema","name":` + long(65) + `,"schema":{}}}`), CodeStringAboveMaxLength, "text.format.name"},
		{"text.format.name", body(`"text":{"format":{"type":"json_schema","name":"a b","schema":{}}}`), CodeInvalidValue, "text.format.name"},
		{"truncation", body(`"truncation":"middle"`), CodeInvalidValue, "truncation"},
		{"service_tier", body(`"service_tier":"scale"`), CodeInvalidValue, "service_tier"},
		{"include[]", body(`"include":["reasoning.encrypted_content","file_search_call.results"]`), CodeInvalidValue, "include[1]"},
		{"safety_identifier", body(`"safety_identifier":` + long(65)), CodeStringAboveMaxLength, "safety_identifier"},
		{"prompt_cache_key", body(`"prompt_cache_key":` + long(65)), CodeStringAboveMaxLength, "prompt_cache_key"},
		{"metadata", body(`"metadata":{` + metadataMembers(17) + `}`), CodeInvalidValue, "metadata"},
		{"metadata.*", body(`"metadata":{"k":` + long(513) + `}`), CodeInvalidValue, "metadata.k"},
		{"tool_choice", body(`"tool_choice":"any"`), CodeInvalidValue, "tool_choice"},
		{"tool_choice.mode", body(fn + `,"tool_choice":{"type":"allowed_tools","mode":"all","tools":[{"type":"function","name":"get_time"}]}`), CodeInvalidValue, "tool_choice.mode"},
		{"tool_choice.tools", body(fn + `,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`), CodeArrayBelowMinLength, "tool_choice.tools"},
		{"tool_choice.tools", body(fn + `,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[` + strings.Repeat(`{"type":"function","name":"get_time"},`, 128) + `{"type":"function","name":"get_time"}]}`), CodeArrayAboveMaxLength, "tool_choice.tools"},
		{"tools[].name", body(`"tools":[{"type":"function","name":` + long(65) + `}]`), CodeStringAboveMaxLength, "tools[0].name"},
		{"tools[].name", body(`"tools":[{"type":"function","name":"get time"}]`), CodeInvalidValue, "tools[0].name"},
		{"input", `{"model":"sim","input":` + long(maxText+1) + `}`, CodeStringAboveMaxLength, "input"},
		{"input[].role", item(`{"type":"message","role":"tool","content":"x"}`), CodeInvalidValue, "input[0].role"},
		{"input[].status", item(`{"type":"message","role":"assistant","status":"done","content":"x"}`), CodeInvalidValue, "input[0].status"},
		{"input[].phase", item(`{"type":"message","role":"assistant","phase":"draft","content":"x"}`), CodeInvalidValue, "input[0].phase"},
		{"input[].content", item(`{"type":"message","role":"user","content":` + long(maxText+1) + `}`), CodeStringAboveMaxLength, "input[0].content"},
		{"input[].content[].text", user(`{"type":"input_text","text":` + long(maxText+1) + `}`), CodeStringAboveMaxLength, "input[0].content[0].text"},
		{"input[].content[].refusal", item(`{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":` + long(maxText+1) + `}]}`), CodeStringAboveMaxLength, "input[0].content[0].refusal"},
		{"input[].content[].image_url", user(`{"type":"input_image","image_url":` + long(20971521) + `}`), CodeStringAboveMaxLength, "input[0].content[0].image_url"},
		{"input[].content[].file_data", user(`{"type":"input_file","file_data":` + long(33554433) + `}`), CodeStringAboveMaxLength, "input[0].content[0].file_data"},
		{"input[].content[].detail", user(`{"type":"input_image","image_url":"https://x/y.png","detail":"max"}`), CodeInvalidValue, "input[0].content[0].detail"},
		{"input[].content[].annotations[].start_index", item(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","start_index":-1,"end_index":0,"url":"u","title":"t"}]}]}`), CodeIntegerBelowMin, "input[0].content[0].annotations[0].start_index"},
		{"input[].content[].annotations[].end_index", item(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","start_index":0,"end_index":-1,"url":"u","title":"t"}]}]}`), CodeIntegerBelowMin, "input[0].content[0].annotations[0].end_index"},
		{"input[].summary[].text", item(`{"type":"reasoning","summary":[{"type":"summary_text","text":` + long(maxText+1) + `}]}`), CodeStringAboveMaxLength, "input[0].summary[0].text"},
		{"input[].encrypted_content", item(`{"type":"reasoning","summary":[],"encrypted_content":` + long(maxText+1) + `}`), CodeStringAboveMaxLength, "input[0].encrypted_content"},
		{"input[].call_id", item(`{"type":"function_call","call_id":` + long(65) + `,"name":"f","arguments":"{}"}`), CodeStringAboveMaxLength, "input[0].call_id"},
		{"input[].call_id", item(`{"type":"function_call_output","call_id":"","output":"x"}`), CodeStringBelowMinLength, "input[0].call_id"},
		{"input[].name", item(`{"type":"function_call","call_id":"c1","name":"","arguments":"{}"}`), CodeStringBelowMinLength, "input[0].name"},
		{"input[].name", item(`{"type":"function_call","call_id":"c1","name":"a.b","arguments":"{}"}`), CodeInvalidValue, "input[0].name"},
		{"input[].output", out(long(maxText + 1)), CodeStringAboveMaxLength, "input[1].output"},
		{"input[].output[].text", out(`[{"type":"input_text","text":` + long(maxText+1) + `}]`), CodeStringAboveMaxLength, "input[1].output[0].text"},
		{"input[].output[].image_url", out(`[{"type":"input_image","image_url":` + long(20971521) + `}]`), CodeStringAboveMaxLength, "input[1].output[0].image_url"},
		{"input[].output[].file_data", out(`[{"type":"input_file","file_data":` + long(33554433) + `}]`), CodeStringAboveMaxLength, "input[1].output[0].file_data"},
		{"input[].output[].detail", out(`[{"type":"input_image","image_url":"https://x/y.png","detail":"max"}]`), CodeInvalidValue, "input[1].output[0].detail"},
	}
}

func metadataMembers(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(parts, ",")
}
