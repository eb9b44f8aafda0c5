package soak

// badFrame is a client frame the server must answer with one error envelope of code, leaving
// the connection usable (docs/append-protocol.md, Errors).
type badFrame struct {
	name   string
	data   string
	binary bool
	code   string
	only   shape // -1: both shapes
}

const bothShapes shape = -1

var badFrames = []badFrame{
	{name: "truncated JSON", data: `{"type":"response.create","model":`, code: "invalid_json", only: bothShapes},
	{name: "not JSON", data: `hello, server`, code: "invalid_json", only: bothShapes},
	{name: "JSON array", data: `[1,2,3]`, code: "invalid_json", only: bothShapes},
	{name: "unknown type", data: `{"type":"response.frobnicate","response_id":"resp_x"}`, code: "unknown_event_type", only: bothShapes},
	{name: "missing type", data: `{"model":"sim","input":"hi"}`, code: "missing_required_parameter", only: bothShapes},
	{name: "type not a string", data: `{"type":7}`, code: "invalid_type", only: bothShapes},
	{name: "model not a string", data: `{"type":"response.create","model":42,"input":"hi"}`, code: "invalid_type", only: bothShapes},
	{name: "input a number", data: `{"type":"response.create","model":"sim","input":7}`, code: "invalid_type", only: bothShapes},
	{name: "max_output_tokens a string", data: `{"type":"response.create","model":"sim","input":"hi","max_output_tokens":"ten"}`, code: "invalid_type", only: bothShapes},
	{name: "create without model", data: `{"type":"response.create","input":"hi"}`, code: "missing_required_parameter", only: bothShapes},
	{name: "misspelt field", data: `{"type":"response.create","model":"sim","input":"hi","temprature":0.5}`, code: "unknown_parameter", only: bothShapes},
	{name: "binary frame", data: `{"type":"response.create","model":"sim","input":"hi"}`, binary: true, code: "unsupported_frame", only: bothShapes},
	{name: "append to an unknown id", data: `{"type":"response.append","response_id":"resp_00000000000000000000000000000000","input":[]}`, code: "response_not_found", only: appendShape},
	{name: "cancel of an unknown id", data: `{"type":"response.cancel","response_id":"resp_00000000000000000000000000000000"}`, code: "response_not_found", only: appendShape},
	{name: "response_id a number", data: `{"type":"response.append","response_id":7,"input":[]}`, code: "invalid_type", only: appendShape},
	{name: "append on the public shape", data: `{"type":"response.append","response_id":"resp_x","input":[]}`, code: "unknown_event_type", only: publicShape},
	{name: "continuation of an unknown id", data: `{"type":"response.create","model":"sim","previous_response_id":"resp_00000000000000000000000000000000","input":"hi"}`, code: "previous_response_not_found", only: publicShape},
}

// badFramesFor returns the bad frames valid on a shape.
func badFramesFor(sh shape) []badFrame {
	var out []badFrame
	for _, b := range badFrames {
		if b.only == bothShapes || b.only == sh {
			out = append(out, b)
		}
	}
	return out
}
