package responses

import (
	"encoding/json"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// TestCreateCarriesSettings: the upstream response.create carries every sampling setting of
// the rollout (exact bytes), and omits those left to the engine's default.
func TestCreateCarriesSettings(t *testing.T) {
	temp, topP, presence, frequency := 0.5, 0.9, -0.5, 1.25
	s := &sampler.Settings{Model: "m", Temperature: &temp, TopP: &topP, PresencePenalty: &presence,
		FrequencyPenalty: &frequency, Verbosity: "low", ReasoningEffort: "high", ParallelToolCalls: true}
	in := []protocol.Item{{Type: protocol.ItemMessage, Role: protocol.RoleUser, Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: "hi"}}}}
	b, err := json.Marshal(newCreate(s, 0, "", in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"response.create","model":"m","input":[{"type":"message","content":[{"type":"input_text","text":"hi"}],"role":"user"}],` +
		`"parallel_tool_calls":true,"temperature":0.5,"top_p":0.9,"presence_penalty":-0.5,"frequency_penalty":1.25,` +
		`"text":{"verbosity":"low"},"reasoning":{"effort":"high"},"store":false}`
	if string(b) != want {
		t.Fatalf("create\n got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(newCreate(&sampler.Settings{Model: "m"}, 0, "", in))
	if want := `{"type":"response.create","model":"m","input":[{"type":"message","content":[{"type":"input_text","text":"hi"}],"role":"user"}],"parallel_tool_calls":false,"store":false}`; string(b) != want {
		t.Fatalf("defaults\n got %s\nwant %s", b, want)
	}
}
