package sampler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tetherd/tether/sampler"
)

// recorder is an Output that keeps what it was given.
type recorder struct{ text, args strings.Builder }

func (r *recorder) Text(d string) error       { r.text.WriteString(d); return nil }
func (r *recorder) Call(string, string) error { return nil }
func (r *recorder) Arguments(d string) error  { r.args.WriteString(d); return nil }

// TestLimitOutput: each bound stops the delta that would pass it, and only that one.
func TestLimitOutput(t *testing.T) {
	var rec recorder
	o := sampler.LimitOutput(&rec, sampler.OutputLimits{MaxTokens: 3})
	for _, d := range []string{"a", "", "b", "c"} {
		if err := o.Text(d); err != nil {
			t.Fatalf("delta %q: %v", d, err)
		}
	}
	if err := o.Text("d"); !errors.Is(err, sampler.ErrMaxOutputTokens) {
		t.Fatalf("the fourth token: %v", err)
	}
	if rec.text.String() != "abc" || o.Tokens() != 3 {
		t.Fatalf("passed %q, counted %d tokens", rec.text.String(), o.Tokens())
	}

	// One delta longer than the budget's bytes is over it, whatever the delta count says.
	o = sampler.LimitOutput(&rec, sampler.OutputLimits{MaxTokens: 2})
	if err := o.Text(strings.Repeat("x", 2*sampler.MaxTokenBytes+1)); !errors.Is(err, sampler.ErrMaxOutputTokens) {
		t.Fatalf("a long delta: %v", err)
	}
	if err := o.Text(strings.Repeat("x", 2*sampler.MaxTokenBytes)); err != nil {
		t.Fatalf("a delta at the bound: %v", err)
	}

	o = sampler.LimitOutput(&rec, sampler.OutputLimits{MaxBytes: 10, MaxArgumentBytes: 6})
	var le *sampler.LimitError
	if err := o.Call("f", ""); err != nil {
		t.Fatal(err)
	}
	if err := o.Arguments("1234"); err != nil {
		t.Fatal(err)
	}
	if err := o.Arguments("567"); !errors.As(err, &le) || le.Limit != 6 || !strings.Contains(err.Error(), "one tool call's arguments") {
		t.Fatalf("arguments past 6 bytes: %v", err)
	}
	_ = o.Call("g", "")
	if err := o.Arguments("56"); err != nil {
		t.Fatalf("a new call's arguments: %v", err)
	}
	if err := o.Text("12345"); !errors.As(err, &le) || le.Limit != 10 || !strings.Contains(err.Error(), "more than 10 bytes in one step") {
		t.Fatalf("text past the step's 10 bytes: %v", err)
	}
	if err := sampler.LimitOutput(&rec, sampler.OutputLimits{MaxBytes: 4 << 20}).Text(strings.Repeat("x", 4<<20+1)); err == nil ||
		!strings.Contains(err.Error(), "more than 4 MiB") {
		t.Fatalf("4 MiB: %v", err)
	}
}

// TestStepTokens: the smaller positive bound wins; 0 or negative is none.
func TestStepTokens(t *testing.T) {
	for _, c := range []struct{ req, srv, want int }{
		{0, 0, 0}, {100, 0, 100}, {0, 500, 500}, {100, 500, 100}, {900, 500, 500}, {0, -1, 0}, {100, -1, 100},
	} {
		if got := sampler.StepTokens(c.req, c.srv); got != c.want {
			t.Errorf("StepTokens(%d, %d) = %d, want %d", c.req, c.srv, got, c.want)
		}
	}
}
