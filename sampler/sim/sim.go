package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tetherd/tether/internal/simmeta"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Speed is a sim speed preset: its decode rate in tokens per second, 0 for instant
// (flag -model-speed, metadata "sim.speed").
type Speed int

// The presets. See Speed.Cost for their time to first token and prefill rate.
const (
	SpeedInstant Speed = 0
	Speed65      Speed = 65
	Speed1000    Speed = 1000
	Speed4000    Speed = 4000
)

// ParseSpeed parses a preset name: "instant" (or "0"), "65", "1000", "4000". Other names
// return an error wrapping ErrUnknownSpeed.
func ParseSpeed(s string) (Speed, error) {
	rate, err := simmeta.ParseSpeed(s)
	return Speed(rate), err
}

// String returns the preset's name, as ParseSpeed accepts it.
func (s Speed) String() string {
	if s == SpeedInstant {
		return "instant"
	}
	return strconv.Itoa(int(s))
}

// Cost returns the preset's cost model:
//
//	preset   time to first token   prefill (tokens/s)   decode (tokens/s)
//	instant  0                     free                 free
//	65       500ms                 3,000                65
//	1000     100ms                 20,000               1,000
//	4000     30ms                  80,000               4,000
//
// A Speed that is not a preset decodes at its value with the 1000 preset's TTFT and prefill.
func (s Speed) Cost() CostModel {
	switch s {
	case SpeedInstant:
		return CostModel{}
	case Speed65:
		return CostModel{TTFT: 500 * time.Millisecond, PrefillRate: 3000, DecodeRate: 65}
	case Speed4000:
		return CostModel{TTFT: 30 * time.Millisecond, PrefillRate: 80000, DecodeRate: 4000}
	}
	return CostModel{TTFT: 100 * time.Millisecond, PrefillRate: 20000, DecodeRate: float64(s)}
}

// CostModel is the sim's engine timing. Zero rates are free.
type CostModel struct {
	TTFT        time.Duration // fixed time to first token of every sampling step
	PrefillRate float64       // tokens/s for context tokens not in the model's state
	DecodeRate  float64       // tokens/s for generated tokens
}

// Duration returns the engine time of a step that prefills prefill tokens and generates
// decode tokens: TTFT + prefill/PrefillRate + decode/DecodeRate.
func (c CostModel) Duration(prefill, decode int) time.Duration {
	return c.TTFT + c.prefill(prefill) + c.decode(decode)
}

func (c CostModel) prefill(n int) time.Duration { return rate(n, c.PrefillRate) }
func (c CostModel) decode(n int) time.Duration  { return rate(n, c.DecodeRate) }

func rate(n int, perSecond float64) time.Duration {
	if perSecond <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / perSecond * float64(time.Second))
}

// SimOptions configure NewSim. The zero value is an instant sim that never sleeps.
type SimOptions struct {
	// Speed is the default preset (metadata "sim.speed" overrides it per request).
	Speed Speed
	// Realtime makes the sim sleep for its cost model's time (demos, the server). When false
	// the sim never sleeps and only reports StepResult.ModelTime (the bench, tests).
	Realtime bool
	// ContextWindow is the model's context window in tokens of its rendered context
	// (instructions, items and their markers, output), 0 for none. Input that would take a
	// rollout's context past it fails the rollout (CodeContextLengthExceeded), and a step
	// whose output fills it ends incomplete (protocol.ReasonContextLength). Negative is none.
	ContextWindow int
}

// DefaultContextWindow is the context window, in tokens, that tether serve gives the sim
// (-model-context) and that an embedded server's default sim has: 1 Mi, about the largest
// windows of OpenAI's models. It bounds what one request can make the sim tokenize (a long item
// referenced many times by item_reference, say) to about what a real engine's context would,
// well above what the tests, the bench and the soak build.
const DefaultContextWindow = 1 << 20

// Sim is the deterministic simulated model: no weights, its output a pure
// function of the context's text and the settings. See the package doc for its policy.
type Sim struct {
	opts SimOptions
}

// NewSim returns the sim backend.
func NewSim(opts SimOptions) *Sim { return &Sim{opts: opts} }

var (
	_ sampler.Model           = (*Sim)(nil)
	_ sampler.RequestChecker  = (*Sim)(nil)
	_ sampler.Lister          = (*Sim)(nil)
	_ sampler.Unparker        = (*Sim)(nil)
	_ sampler.ParkableSession = (*session)(nil)
)

// Metadata keys read by the sim (package internal/simmeta parses them).
const (
	MetaCalls        = simmeta.Calls
	MetaParallel     = simmeta.Parallel
	MetaTool         = simmeta.Tool
	MetaFail         = simmeta.Fail
	MetaSpeed        = simmeta.Speed
	MetaAnswerTokens = simmeta.AnswerTokens
)

// CheckMetadata validates the sim's "sim.*" metadata keys; it returns invalid_value (400) with
// param "metadata.<key>" for a bad value, nil otherwise. The sim itself ignores bad values
// (uses the defaults), so calling it is optional.
func CheckMetadata(md map[string]string) error { return simmeta.Check(md) }

// CanSteer implements sampler.Steerable: a step cut short by response.steer leaves its items
// in the context, and the next step samples on from them and the steer's input.
func (s *Sim) CanSteer() bool { return true }

// CheckRequest implements sampler.RequestChecker: the sim validates its "sim.*" metadata
// keys (CheckMetadata).
func (s *Sim) CheckRequest(p *protocol.CreateParams) error {
	return CheckMetadata(p.Metadata)
}

// ModelIDs are the model ids the sim lists in GET /v1/models. It serves any model name: the
// name is echoed, never interpreted.
var ModelIDs = []string{"sim"}

// Models implements sampler.Lister.
func (s *Sim) Models(context.Context) ([]string, error) { return ModelIDs, nil }

// sample runs one sampling step of req.
func (s *Sim) sample(ctx context.Context, req *request, out sampler.Output) (sampler.StepResult, error) {
	p, perr := simmeta.Parse(req.Settings.Metadata)
	if perr != nil {
		p = simmeta.Defaults
	}
	speed := s.opts.Speed
	if p.HasSpeed {
		speed = Speed(p.Speed)
	}
	st := simStep{
		ctx:      ctx,
		out:      out,
		cost:     speed.Cost(),
		realtime: s.opts.Realtime && speed != SpeedInstant,
		budget:   req.Settings.MaxOutputTokens,
		room:     -1,
		mem:      req.Budget,
	}
	defer st.drop()
	if w := req.Context.window; w > 0 {
		st.room = max(w-req.Context.Len(), 0)
	}
	prefill := req.Context.Len() - req.Cached
	if prefill < 0 {
		prefill = 0
	}
	st.start = time.Now()
	st.due = st.cost.TTFT + st.cost.prefill(prefill)
	result := func() sampler.StepResult {
		return sampler.StepResult{InputTokens: req.Context.Len(), CachedTokens: req.Cached, OutputTokens: st.generated,
			Incomplete: st.incomplete, ModelTime: st.cost.Duration(prefill, st.generated)}
	}
	if err := st.wait(); err != nil {
		return result(), err
	}
	if p.FailStep == req.Step {
		return result(), fmt.Errorf("%w (metadata sim.fail at step %d)", ErrInjectedFailure, req.Step)
	}
	calls := planCalls(req, &p)
	limit := synthLimit(st.budget)
	if st.room >= 0 {
		limit = min(limit, synthLimit(max(st.room, 1)))
	}
	for i, t := range calls {
		marker := "tether-call-" + strconv.Itoa(req.Context.Calls()+i+1)
		info := req.tool(t)
		args, cut := synthArguments(info, marker, keyword(req.Context.LastUserText()), limit)
		if err := st.hold(len(args)); err != nil {
			return result(), err
		}
		if err := out.Call(t.Name, ""); err != nil {
			return result(), err
		}
		if err := st.streamTokens(len(req.nameTokens(t.Name))); err != nil || st.incomplete != "" {
			return result(), err
		}
		ids := req.generated()
		if err := st.stream(args, out.Arguments, ids); err != nil || st.incomplete != "" {
			return result(), err
		}
		if cut {
			st.incomplete = protocol.ReasonMaxOutputTokens
			return result(), nil
		}
		req.keepGenerated(t.Name, args, ids)
		st.drop()
	}
	if len(calls) > 0 {
		return result(), nil
	}
	value, rest, cut := formatAnswer(req.Settings.TextFormat, req.Context, p.AnswerTokens, limit)
	if err := st.hold(len(value)); err != nil {
		return result(), err
	}
	err := st.streamFrom(value, rest, out.Text, nil)
	if err == nil && cut && st.incomplete == "" {
		st.incomplete = protocol.ReasonMaxOutputTokens
	}
	return result(), err
}

// maxSynthBytes bounds a value the sim synthesises from a schema (call arguments, a
// json_schema answer): the sim's longest output. A value cut there ends the step incomplete
// (max_output_tokens), as a model's own output limit does.
const maxSynthBytes = 1 << 20

// maxTokenBytes is o200k_base's longest token, in bytes (a run of 128 spaces).
const maxTokenBytes = 128

// synthLimit is the most bytes worth synthesising for a step of budget tokens (0: none): a
// value cut there still holds more than budget tokens, so the step ends at its budget just as
// it would with the whole value.
func synthLimit(budget int) int {
	if budget > 0 && budget < maxSynthBytes/maxTokenBytes {
		return budget*maxTokenBytes + 1
	}
	return maxSynthBytes
}

// planCalls returns the tools to call in this step, in order; none means answer.
func planCalls(req *request, p *simmeta.Params) []*protocol.Tool {
	set := req.Settings
	var tools []*protocol.Tool
	for i := range set.Tools {
		if set.Tools[i].Type == protocol.ToolFunction && set.Tools[i].Name != "" && set.ToolChoice.Allows(set.Tools[i].Name) {
			tools = append(tools, &set.Tools[i])
		}
	}
	choice := set.ToolChoice.Effective()
	if len(tools) == 0 || choice == protocol.ToolChoiceNone {
		return nil
	}
	remaining := -1
	if set.MaxToolCalls > 0 {
		remaining = set.MaxToolCalls - req.Calls
		if remaining <= 0 {
			return nil
		}
	}
	forced := choice == protocol.ToolChoiceRequired || choice == "function"
	if !forced && req.Context.TurnCallSteps() >= p.Calls {
		return nil
	}
	k := p.Parallel
	if !set.ParallelToolCalls {
		k = 1
	}
	if remaining > 0 && k > remaining {
		k = remaining
	}
	find := func(name string) *protocol.Tool {
		for _, t := range tools {
			if t.Name == name {
				return t
			}
		}
		return nil
	}
	var only *protocol.Tool
	switch {
	case choice == "function":
		if only = find(set.ToolChoice.Name); only == nil {
			return nil // the named function is not offered: nothing callable
		}
	case p.Tool != "" && find(p.Tool) != nil:
		only = find(p.Tool)
	default:
		for _, t := range tools {
			if req.tool(t).shell {
				only = t
				break
			}
		}
	}
	calls := make([]*protocol.Tool, k)
	for i := range calls {
		if only != nil {
			calls[i] = only
		} else {
			calls[i] = tools[i%len(tools)]
		}
	}
	return calls
}

// keyword returns a short word of the last user text: its last word of letters or digits (at
// most 32 runes), or "tether".
func keyword(text string) string {
	end := -1
	for i := len(text); i > 0; {
		r, size := utf8.DecodeLastRuneInString(text[:i])
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		if end < 0 && word {
			end = i
		} else if end >= 0 && !word {
			return truncRunes(text[i:end], 32)
		}
		i -= size
	}
	if end >= 0 {
		return truncRunes(text[:end], 32)
	}
	return "tether"
}

func truncRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// Fingerprint returns the context fingerprint the sim's answer ends with:
// "[ctx N tokens 0xHHHHHHHHHHHHHHHH]", N the token count and H the FNV-64a hash of the token ids
// (each as 4 little-endian bytes). Equal fingerprints mean the model saw identical contexts.
func Fingerprint(tokens []uint32) string {
	return formatFingerprint(len(tokens), fnvTokens(fnvOffset, tokens))
}

// The FNV-64a parameters of Fingerprint.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvTokens continues the FNV-64a hash h over tokens, each as 4 little-endian bytes.
func fnvTokens(h uint64, tokens []uint32) uint64 {
	for _, t := range tokens {
		h = (h ^ uint64(t&0xff)) * fnvPrime
		h = (h ^ uint64(t>>8&0xff)) * fnvPrime
		h = (h ^ uint64(t>>16&0xff)) * fnvPrime
		h = (h ^ uint64(t>>24)) * fnvPrime
	}
	return h
}

func formatFingerprint(n int, h uint64) string {
	return fmt.Sprintf("[ctx %d tokens 0x%016x]", n, h)
}

// simStep streams one step's output on the cost model's clock.
type simStep struct {
	ctx        context.Context
	out        sampler.Output
	cost       CostModel
	realtime   bool
	start      time.Time
	due        time.Duration // model time of the next emission, from start
	budget     int           // max output tokens of the step, 0 = unlimited
	room       int           // tokens the context window has left for the output, -1 = unlimited
	generated  int
	incomplete string
	mem        sampler.Budget // the server's memory budget (nil: none), for what the step builds ahead
	held       int64          // reserved in mem by hold
}

// heldMin is the smallest value hold counts: a value the sim builds before it streams it is
// at most maxSynthBytes, and one under this takes no more than the rollout's Output reserves
// at a time for what it streams (sampler.AccrueChunk).
const heldMin = sampler.AccrueChunk

// hold counts n bytes the step has built before streaming them (a call's arguments, a
// json_schema answer) in the memory budget until drop; the rollout's Output counts the copy it
// accrues as they stream. n under heldMin is not counted. A value that does not fit fails
// the step with a *sampler.MemoryError.
func (st *simStep) hold(n int) error {
	st.drop()
	if st.mem == nil || n < heldMin {
		return nil
	}
	if !st.mem.TryReserve(int64(n)) {
		return &sampler.MemoryError{What: "one value the sim synthesised", Held: int64(n)}
	}
	st.held = int64(n)
	return nil
}

// drop gives back what hold counted.
func (st *simStep) drop() {
	if st.held > 0 {
		st.mem.Release(st.held)
		st.held = 0
	}
}

// wait sleeps until the model time due (realtime only), honouring ctx.
func (st *simStep) wait() error {
	if !st.realtime {
		return st.ctx.Err()
	}
	d := time.Until(st.start.Add(st.due))
	if d <= 0 {
		return st.ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-st.ctx.Done():
		return st.ctx.Err()
	}
}

// full reports whether the step may generate no more tokens, and then sets st.incomplete: its
// budget (max_output_tokens) is spent, or the context window is full (context_length_exceeded,
// as an engine reports a context it filled).
func (st *simStep) full() bool {
	switch {
	case st.budget > 0 && st.generated >= st.budget:
		st.incomplete = protocol.ReasonMaxOutputTokens
	case st.room >= 0 && st.generated >= st.room:
		st.incomplete = protocol.ReasonContextLength
	default:
		return false
	}
	return true
}

// streamTokens generates n tokens without emitting them (a call's name, whose tokens the
// session knows): the step's budget as stream's, and one wait for their model time at the end
// (stream(name, nil, nil) waits at each delta boundary, which ends at the same time).
func (st *simStep) streamTokens(n int) error {
	made := 0
	for ; made < n; made++ {
		if st.full() {
			break
		}
		st.generated++
		st.due += st.cost.decode(1)
	}
	if made > 0 {
		return st.wait()
	}
	return nil
}
