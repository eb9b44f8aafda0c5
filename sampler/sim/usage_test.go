package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// stepUsage is one step's usage as the sim reports it.
type stepUsage struct{ input, cached, output int }

func usageOf(u protocol.Usage) stepUsage {
	return stepUsage{u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens}
}

// pinnedStep is one step of pinnedRollout: its usage, the context it saw and its output.
type pinnedStep struct {
	usage   stepUsage
	context []protocol.Item
	output  []protocol.Item
}

// pinnedRollout runs a multi-turn rollout (instructions, two tools, parallel calls with
// arguments that need escaping, three call steps, answers, a second user turn) and returns its
// steps.
func pinnedRollout(t *testing.T) ([]pinnedStep, Settings) {
	t.Helper()
	odd := fnTool("look_ünï", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q","n"]}`)
	set := Settings{Model: "sim", Tools: []protocol.Tool{execTool, odd}, Instructions: "You are terse.", ParallelToolCalls: true,
		Metadata: map[string]string{MetaCalls: "3", MetaParallel: "2"}}
	hist := []protocol.Item{userMsg("old question"), {Type: protocol.ItemMessage, Role: protocol.RoleAssistant,
		Content: []protocol.ContentPart{{Type: protocol.PartOutputText, Text: "old answer"}}}}
	r, rec := start(t, Config{Settings: set, History: hist, SuspendOnAnswer: true,
		Input: []protocol.Item{userMsg(`find <a&b> "quoted" naïveté in the repo`)}})
	// What each suspension gets: tool outputs for calls, a user message after an answer.
	feeds := []string{"total 12\ndrwxr-xr-x 3 tether", "ok: 3 files changed, 41 insertions(+)", "\u00e9t\u00e9 \t\n  done",
		"now look again, then answer in one word", "x", strings.Repeat("line of output\n", 40), "{\"ok\":true}"}
	var steps []pinnedStep
	for i := 0; ; i++ {
		s := rec.mustSuspend(t)
		steps = append(steps, pinnedStep{usageOf(s.StepUsage), s.Context[:len(s.Context)-len(s.Output)], s.Output})
		if i == len(feeds) {
			if len(s.PendingCallIDs) != 0 {
				t.Fatalf("step %d: calls %v, want the answer", i, s.PendingCallIDs)
			}
			return steps, set
		}
		in := outputs(s, feeds[i])
		if len(s.PendingCallIDs) == 0 {
			in = []protocol.Item{userMsg(feeds[i])}
		}
		if err := r.Resume(Resume{Input: in}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUsagePinned pins the usage of every step of a multi-turn rollout: input_tokens,
// cached_tokens and output_tokens are what the sim reported for this rollout when the numbers
// were first recorded, and each also equals its definition: input, the render of the step's
// context; cached, the render of the previous step's context and output; output, the tokens of
// the step's items' text (a call's name and arguments, an answer's text). How the sim gets its
// tokens may change; these numbers may not.
func TestUsagePinned(t *testing.T) {
	want := []stepUsage{
		// recorded from the sim before it kept its output's tokens with the generated text
		{input: 39, cached: 0, output: 22}, {input: 107, cached: 71, output: 22}, {input: 175, cached: 139, output: 22},
		{input: 225, cached: 207, output: 136}, {input: 378, cached: 365, output: 22}, {input: 422, cached: 410, output: 22},
		{input: 784, cached: 454, output: 22}, {input: 836, cached: 816, output: 223},
	}
	// the fingerprint of the last answer's context (its tokens), recorded with want
	const wantFingerprint = "[ctx 836 tokens 0x77f976f03f701385]"
	steps, set := pinnedRollout(t)
	var got []stepUsage
	for i, st := range steps {
		got = append(got, st.usage)
		if in := len(RenderItems(&set, st.context)); st.usage.input != in {
			t.Errorf("step %d: input_tokens %d, the render of its context has %d", i, st.usage.input, in)
		}
		cached := 0
		if i > 0 {
			prev := append(slices.Clip(steps[i-1].context), steps[i-1].output...)
			cached = len(RenderItems(&set, prev))
		}
		if st.usage.cached != cached {
			t.Errorf("step %d: cached_tokens %d, the previous step's context and output render to %d", i, st.usage.cached, cached)
		}
		out := 0
		for _, it := range st.output {
			switch it.Type {
			case protocol.ItemFunctionCall:
				out += len(appendEncoded(nil, it.Name)) + len(appendEncoded(nil, it.Arguments))
			case protocol.ItemMessage:
				out += len(appendEncoded(nil, it.Text()))
			}
		}
		if st.usage.output != out {
			t.Errorf("step %d: output_tokens %d, its items' text has %d tokens", i, st.usage.output, out)
		}
	}
	last := steps[len(steps)-1]
	fp := Fingerprint(RenderItems(&set, last.context))
	if text := answerText(last.output); !strings.HasSuffix(text, fp) || fp != wantFingerprint {
		t.Errorf("last answer ends %q, its context renders to %s, want %s", text[max(0, len(text)-40):], fp, wantFingerprint)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("usage per step changed:\n got %s\nwant %s", fmtUsage(got), fmtUsage(want))
	}
}

func fmtUsage(u []stepUsage) string {
	s := ""
	for _, x := range u {
		s += fmt.Sprintf("{input: %d, cached: %d, output: %d}, ", x.input, x.cached, x.output)
	}
	return s
}
