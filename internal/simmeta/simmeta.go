package simmeta

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tetherd/tether/protocol"
)

// Metadata keys read by the sim.
const (
	Calls        = "sim.calls"
	Parallel     = "sim.parallel"
	Tool         = "sim.tool"
	Fail         = "sim.fail"
	Speed        = "sim.speed"
	AnswerTokens = "sim.answer_tokens"
)

// MaxAnswerTokens bounds sim.answer_tokens.
const MaxAnswerTokens = 1 << 20

// ErrUnknownSpeed is returned by ParseSpeed for a name that is not a preset.
var ErrUnknownSpeed = errors.New("sim: unknown speed preset")

// ParseSpeed parses a speed preset name — "instant" (or "0"), "65", "1000", "4000" — to its
// decode rate in tokens per second (0 for instant). Other names return an error wrapping
// ErrUnknownSpeed.
func ParseSpeed(s string) (int, error) {
	switch strings.TrimSpace(s) {
	case "instant", "0":
		return 0, nil
	case "65":
		return 65, nil
	case "1000":
		return 1000, nil
	case "4000":
		return 4000, nil
	}
	return 0, fmt.Errorf("%w %q (want instant, 65, 1000 or 4000)", ErrUnknownSpeed, s)
}

// Params are one request's knobs. The zero value is not the default: use Defaults.
type Params struct {
	Calls        int    // sequential tool-call steps per user turn (sim.calls, 0…1048576)
	Parallel     int    // calls per step (sim.parallel, 1…128)
	Tool         string // the function tool to call (sim.tool); "" lets the sim choose
	FailStep     int    // the step index that fails on purpose (sim.fail "step:N"); -1 never
	HasSpeed     bool   // sim.speed was given
	Speed        int    // its decode rate (ParseSpeed), when HasSpeed
	AnswerTokens int    // pad the answer to about this many tokens (sim.answer_tokens); 0 none
}

// Defaults are the knobs of a request without sim.* metadata: one call per step, one
// tool-call step per turn, no failure, the sim's own speed.
var Defaults = Params{Calls: 1, Parallel: 1, FailStep: -1}

// Parse reads md's sim.* keys over Defaults. A bad value is an invalid_value error (400)
// with param "metadata.<key>"; the Params returned with it are not to be used.
func Parse(md map[string]string) (Params, error) {
	p := Defaults
	bad := func(key, want string) *protocol.Error {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "metadata."+key,
			"Invalid value for metadata key %s: %q (want %s).", key, md[key], want)
	}
	num := func(key string, lo, hi int, dst *int) *protocol.Error {
		v, ok := md[key]
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return bad(key, fmt.Sprintf("an integer from %d to %d", lo, hi))
		}
		*dst = n
		return nil
	}
	if err := num(Calls, 0, 1<<20, &p.Calls); err != nil {
		return p, err
	}
	if err := num(Parallel, 1, 128, &p.Parallel); err != nil {
		return p, err
	}
	if err := num(AnswerTokens, 0, MaxAnswerTokens, &p.AnswerTokens); err != nil {
		return p, err
	}
	p.Tool = md[Tool]
	if v, ok := md[Fail]; ok {
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(v), "step:"))
		if err != nil || n < 0 {
			return p, bad(Fail, `"step:N" with N >= 0`)
		}
		p.FailStep = n
	}
	if v, ok := md[Speed]; ok {
		s, err := ParseSpeed(v)
		if err != nil {
			return p, bad(Speed, "instant, 65, 1000 or 4000")
		}
		p.Speed, p.HasSpeed = s, true
	}
	return p, nil
}

// Check validates md's sim.* keys: Parse's error, or nil.
func Check(md map[string]string) error {
	_, err := Parse(md)
	return err
}
