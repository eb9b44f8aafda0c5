package simmeta

import (
	"errors"
	"testing"

	"github.com/tetherd/tether/protocol"
)

func TestParse(t *testing.T) {
	p, err := Parse(map[string]string{Calls: " 3", Parallel: "2", Tool: "grep", Fail: "step:4", Speed: "65", AnswerTokens: "10", "other": "x"})
	want := Params{Calls: 3, Parallel: 2, Tool: "grep", FailStep: 4, HasSpeed: true, Speed: 65, AnswerTokens: 10}
	if err != nil || p != want {
		t.Fatalf("Parse: %+v %v, want %+v", p, err, want)
	}
	if p, err := Parse(nil); err != nil || p != Defaults {
		t.Fatalf("Parse(nil): %+v %v", p, err)
	}
	for _, c := range []struct{ key, v string }{{Calls, "-1"}, {Parallel, "0"}, {Parallel, "129"}, {Fail, "step:x"}, {Speed, "fast"}, {AnswerTokens, "2000000"}} {
		e, ok := protocol.AsError(Check(map[string]string{c.key: c.v}))
		if !ok || e.Status != 400 || e.Code != protocol.CodeInvalidValue || e.Param != "metadata."+c.key {
			t.Errorf("Check(%s=%q): %v", c.key, c.v, e)
		}
	}
	if _, err := ParseSpeed("warp"); !errors.Is(err, ErrUnknownSpeed) {
		t.Fatalf("ParseSpeed(warp): %v", err)
	}
}
