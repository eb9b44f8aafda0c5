package protocol

import "encoding/json"

// ToolFunction is the type of a function tool; other tool types (namespace, custom,
// local_shell, web_search, …) are accepted and echoed verbatim but never called by sim.
const ToolFunction = "function"

// Tool is one entry of a request's "tools" array (reference §8.6). A function tool has Name,
// Description, Parameters (a JSON schema, may be nil) and Strict; any other type is kept in Raw
// and passed through unchanged in the echoed Response.
type Tool struct {
	Type        string
	Name        string
	Description *string
	Parameters  json.RawMessage // JSON object or nil
	Strict      *bool
	Raw         json.RawMessage // verbatim JSON of a non-function tool
}

// MarshalJSON emits a function tool with description, parameters and strict always present
// (null when unset), as the Open Responses FunctionTool schema requires; other tools verbatim
// (compacted).
func (t Tool) MarshalJSON() ([]byte, error) {
	return appendTool(nil, &t), nil
}

// UnmarshalJSON decodes one tool with the strict rules of DecodeClientEvent.
func (t *Tool) UnmarshalJSON(data []byte) error {
	r, err := newValueReader(data)
	if err == nil {
		*t = Tool{}
		err = r.tool(nil, t)
	}
	if err != nil {
		return err
	}
	return nil
}

// Tool choice modes (reference §8.6).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// ToolChoice is "auto" | "none" | "required" (Mode) or {"type":"function","name":…} (Name set,
// Mode empty). Other object forms (allowed_tools, hosted tools) are kept in Raw and treated as
// "auto". The zero value means "auto".
type ToolChoice struct {
	Mode string
	Name string
	Raw  json.RawMessage
}

// Effective returns the mode the sampler applies: "auto", "none", "required" or "function".
func (c ToolChoice) Effective() string {
	switch {
	case c.Name != "":
		return "function"
	case c.Mode == "":
		return ToolChoiceAuto
	}
	return c.Mode
}

// MarshalJSON emits the string mode, the function object, or Raw.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	return appendToolChoice(nil, &c), nil
}

// UnmarshalJSON decodes tool_choice with the strict rules of DecodeClientEvent (null gives the
// zero value, "auto").
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	r, err := newValueReader(data)
	if err == nil {
		*c, err = r.toolChoice(nil)
	}
	if err != nil {
		return err
	}
	return nil
}
