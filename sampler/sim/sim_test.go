package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// sampleOnce runs the sim on a context and records what it streams.
type capture struct {
	calls []protocol.Item
	text  strings.Builder
}

func (c *capture) Text(d string) error { c.text.WriteString(d); return nil }
func (c *capture) Call(name, _ string) error {
	c.calls = append(c.calls, protocol.Item{Type: protocol.ItemFunctionCall, Name: name})
	return nil
}
func (c *capture) Arguments(d string) error {
	if len(c.calls) == 0 {
		return ErrNoCall
	}
	c.calls[len(c.calls)-1].Arguments += d
	return nil
}

func sampleOnce(t *testing.T, set Settings, items ...protocol.Item) (*capture, StepResult) {
	t.Helper()
	ms, err := NewSim(SimOptions{}).Open(context.Background(), RolloutInfo{Settings: &set})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	var out capture
	res, err := ms.Sample(context.Background(), &Step{Input: items, Context: items}, &out)
	if err != nil {
		t.Fatal(err)
	}
	return &out, res
}

func names(calls []protocol.Item) string {
	var s []string
	for _, c := range calls {
		s = append(s, c.Name)
	}
	return strings.Join(s, ",")
}

func TestSimToolChoice(t *testing.T) {
	tools := []protocol.Tool{weatherTool, timeTool,
		{Type: "custom", Name: "apply_patch", Raw: []byte(`{"type":"custom","name":"apply_patch"}`)}}
	u := userMsg("Weather and time in Paris?")
	cases := []struct {
		name   string
		choice protocol.ToolChoice
		md     map[string]string
		par    bool
		want   string
	}{
		{"auto", protocol.ToolChoice{}, nil, true, "get_weather"},
		{"none", protocol.ToolChoice{Mode: protocol.ToolChoiceNone}, nil, true, ""},
		{"required-even-with-zero-calls", protocol.ToolChoice{Mode: protocol.ToolChoiceRequired}, map[string]string{MetaCalls: "0"}, true, "get_weather"},
		{"named", protocol.ToolChoice{Name: "get_time"}, nil, true, "get_time"},
		{"named-missing", protocol.ToolChoice{Name: "apply_patch"}, nil, true, ""},
		{"sim.tool", protocol.ToolChoice{}, map[string]string{MetaTool: "get_time"}, true, "get_time"},
		{"parallel", protocol.ToolChoice{}, map[string]string{MetaParallel: "2"}, true, "get_weather,get_time"},
		{"parallel-3-cycles", protocol.ToolChoice{}, map[string]string{MetaParallel: "3"}, true, "get_weather,get_time,get_weather"},
		{"parallel-off", protocol.ToolChoice{}, map[string]string{MetaParallel: "2"}, false, "get_weather"},
		{"zero-calls", protocol.ToolChoice{}, map[string]string{MetaCalls: "0"}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := sampleOnce(t, Settings{Tools: tools, ToolChoice: tc.choice, Metadata: tc.md, ParallelToolCalls: tc.par}, u)
			if got := names(out.calls); got != tc.want {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
			if (tc.want == "") != (out.text.Len() > 0) {
				t.Fatalf("answer %q with calls %q", out.text.String(), names(out.calls))
			}
		})
	}
	// Only non-function tools: nothing to call.
	out, _ := sampleOnce(t, Settings{Tools: tools[2:], ToolChoice: protocol.ToolChoice{Mode: protocol.ToolChoiceRequired}}, u)
	if len(out.calls) != 0 {
		t.Fatalf("called a non-function tool: %v", out.calls)
	}
}

func TestSimArguments(t *testing.T) {
	u := userMsg("Weather and time in Paris?")
	cases := []struct {
		tool protocol.Tool
		want string
	}{
		{weatherTool, `{"location":"Paris"}`},
		{execTool, `{"cmd":"echo tether-call-1"}`},
		{fnTool("shell", `{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}},"required":["command"]}`),
			`{"command":["echo","tether-call-1"]}`},
		{fnTool("run", `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
			`{"command":"echo tether-call-1"}`},
		{fnTool("mix", `{"type":"object","properties":{
			"n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"},"list":{"type":"array"},
			"opt":{"type":"string"},"mode":{"enum":["fast","slow"]},"nullable":{"type":["null","string"]},
			"obj":{"type":"object","properties":{"deep":{"type":"boolean"},"skip":{"type":"integer"}},"required":["deep"]}},
			"required":["obj","n","x","b","list","mode","nullable"]}`),
			`{"obj":{"deep":true},"n":1,"x":1,"b":true,"list":[],"mode":"fast","nullable":"Paris"}`},
		{fnTool("noparams", ``), `{}`},
	}
	for _, tc := range cases {
		out, _ := sampleOnce(t, Settings{Tools: []protocol.Tool{tc.tool}}, u)
		if len(out.calls) != 1 || out.calls[0].Arguments != tc.want {
			t.Errorf("%s: calls %+v, want arguments %s", tc.tool.Name, out.calls, tc.want)
		}
	}
	// A shell-like tool is preferred over the first function tool.
	out, _ := sampleOnce(t, Settings{Tools: []protocol.Tool{weatherTool, execTool}}, u)
	if names(out.calls) != "exec_command" {
		t.Fatalf("picked %q, want exec_command", names(out.calls))
	}
	if keyword("no words?!") != "words" || keyword("...") != "tether" || keyword("Ünïcode") != "Ünïcode" {
		t.Fatal("keyword")
	}
}

func TestSimAnswerAndFingerprint(t *testing.T) {
	long := strings.Repeat("x", 200)
	set := Settings{Instructions: "sys"}
	items := []protocol.Item{userMsg("first question"), toolOutput("c1", long), userMsg("second\nline")}
	out, res := sampleOnce(t, set, items...)
	text := out.text.String()
	want := `user: "first question"` + "\n" + `tool: "` + strings.Repeat("x", 64) + `…"` + "\n" + `user: "second\nline"` + "\n" +
		Fingerprint(RenderItems(&set, items))
	if text != want {
		t.Fatalf("answer\n%s\nwant\n%s", text, want)
	}
	if res.OutputTokens != countTokens(text) || res.Incomplete != "" {
		t.Fatalf("result %+v, %d tokens in the text", res, countTokens(text))
	}
	if fp := Fingerprint([]uint32{1, 2, 3}); !strings.HasPrefix(fp, "[ctx 3 tokens 0x") || len(fp) != len("[ctx 3 tokens 0x]")+16 {
		t.Fatalf("Fingerprint = %q", fp)
	}
}

func TestSimMaxOutputTokens(t *testing.T) {
	out, res := sampleOnce(t, Settings{MaxOutputTokens: 5}, userMsg(strings.Repeat("long text ", 50)))
	if res.Incomplete != protocol.ReasonMaxOutputTokens || res.OutputTokens != 5 {
		t.Fatalf("result %+v", res)
	}
	if n := countTokens(out.text.String()); n > 5 || n == 0 {
		t.Fatalf("%d tokens streamed: %q", n, out.text.String())
	}
}

func TestSimPadding(t *testing.T) {
	out, _ := sampleOnce(t, Settings{Metadata: map[string]string{MetaAnswerTokens: "1000"}}, userMsg("hi"))
	if n := countTokens(out.text.String()); n < 1000 || n > 1200 {
		t.Fatalf("padded answer has %d tokens", n)
	}
}

func TestSimFail(t *testing.T) {
	set := Settings{Metadata: map[string]string{MetaFail: "step:0"}}
	ms, _ := NewSim(SimOptions{}).Open(context.Background(), RolloutInfo{Settings: &set})
	defer ms.Close()
	_, err := ms.Sample(context.Background(), &Step{}, &capture{})
	if !errors.Is(err, ErrInjectedFailure) {
		t.Fatalf("err %v", err)
	}
}

func TestSpeedAndCost(t *testing.T) {
	for _, name := range []string{"instant", "65", "1000", "4000"} {
		s, err := ParseSpeed(name)
		if err != nil || s.String() != name {
			t.Fatalf("ParseSpeed(%q) = %v, %v", name, s, err)
		}
	}
	if _, err := ParseSpeed("fast"); !errors.Is(err, ErrUnknownSpeed) {
		t.Fatalf("ParseSpeed(fast) err %v", err)
	}
	if d := SpeedInstant.Cost().Duration(1e6, 1e6); d != 0 {
		t.Fatalf("instant costs %v", d)
	}
	// 1000 preset: 100ms TTFT + 20,000 tokens at 20,000/s + 1,000 tokens at 1,000/s = 2.1s.
	if d := Speed1000.Cost().Duration(20000, 1000); d != 2100*time.Millisecond {
		t.Fatalf("1000 preset: %v", d)
	}
	if e, _ := protocol.AsError(CheckMetadata(map[string]string{MetaCalls: "x"})); e == nil || e.Param != "metadata.sim.calls" {
		t.Fatalf("CheckMetadata: %v", e)
	}
	if err := CheckMetadata(map[string]string{MetaCalls: "20", MetaParallel: "2", MetaFail: "step:3", MetaSpeed: "65", "other": "x"}); err != nil {
		t.Fatal(err)
	}
}
