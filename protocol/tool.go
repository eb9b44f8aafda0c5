package protocol

import (
	"encoding/json"
	"fmt"
)

// ToolFunction is the type of a function tool; other tool types (namespace, custom,
// local_shell, web_search, …) are accepted and echoed verbatim but never called by sim.
const ToolFunction = "function"

// Tool is one entry of a request's "tools" array. A function tool has Name,
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
	var v Tool
	err := decodeText(data, "", false, func(d *dec) *Error { return d.tool(&v) })
	return setUnlessInvalid(t, v, err)
}

// Tool choice modes, and the allowed_tools object type.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceAllowed  = "allowed_tools"
)

// ToolChoice is "auto" | "none" | "required" (Mode), {"type":"function","name":…} (Name set,
// Mode empty), or {"type":"allowed_tools","mode":…,"tools":[…]} (Allowed non-nil: the names
// of the allowed tools, Mode its mode, Raw the object). Other object forms (hosted tools) are
// kept in Raw and treated as "auto". The zero value means "auto".
type ToolChoice struct {
	Mode    string
	Name    string
	Allowed []string
	Raw     json.RawMessage
}

// Effective returns the mode the sampler applies: "auto", "none", "required" or "function".
// For allowed_tools it is the object's mode; Allows says which tools it leaves callable.
func (c ToolChoice) Effective() string {
	switch {
	case c.Name != "":
		return "function"
	case c.Mode == "":
		return ToolChoiceAuto
	}
	return c.Mode
}

// Allows reports whether the tool name may be called under this choice: any tool, unless
// the choice names a function (only it) or lists allowed_tools (only those).
func (c ToolChoice) Allows(name string) bool {
	switch {
	case c.Name != "":
		return name == c.Name
	case c.Allowed != nil:
		for _, a := range c.Allowed {
			if a == name {
				return true
			}
		}
		return false
	}
	return true
}

// CheckToolChoice checks that the function tool_choice names, and every tool allowed_tools
// lists, is among tools (by name): else invalid_value (400) with param "tool_choice.name" or
// "tool_choice.tools[i].name".
func CheckToolChoice(choice ToolChoice, tools []Tool) *Error {
	offered := func(name string) bool {
		for i := range tools {
			if tools[i].Name == name || tools[i].Name == "" && rawName(tools[i].Raw) == name {
				return true
			}
		}
		return false
	}
	if choice.Name != "" && !offered(choice.Name) {
		return Errorf(400, CodeInvalidValue, "tool_choice.name",
			"Tool choice '%s' not found in 'tools' parameter.", clip(choice.Name))
	}
	for i, name := range choice.Allowed {
		if name != "" && !offered(name) {
			return Errorf(400, CodeInvalidValue, fmt.Sprintf("tool_choice.tools[%d].name", i),
				"Allowed tool '%s' not found in 'tools' parameter.", clip(name))
		}
	}
	return nil
}

// MarshalJSON emits the string mode, the function object, or Raw.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	return appendToolChoice(nil, &c), nil
}

// UnmarshalJSON decodes tool_choice with the strict rules of DecodeClientEvent (null gives the
// zero value, "auto").
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	var v ToolChoice
	err := decodeText(data, "", false, func(d *dec) (err *Error) {
		v, err = d.toolChoice()
		return err
	})
	return setUnlessInvalid(c, v, err)
}

// rawName returns the "name" member of a verbatim tool (custom, namespace), or "".
func rawName(raw json.RawMessage) string {
	var t struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Name
}
