package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// parkRecorder is a recorder that can park (ParkSink).
type parkRecorder struct {
	*recorder
	parked chan *ParkedRollout
}

func newParkRecorder() *parkRecorder {
	return &parkRecorder{recorder: newRecorder(), parked: make(chan *ParkedRollout, 1)}
}

func (r *parkRecorder) Parked(p *ParkedRollout) { r.parked <- p }

// continuing returns a parkRecorder for the rollout Unpark continues (its Started was heard).
func continuing() *parkRecorder {
	r := newParkRecorder()
	r.started = 1
	return r
}

func (r *parkRecorder) mustPark(t *testing.T) *ParkedRollout {
	t.Helper()
	select {
	case p := <-r.parked:
		return p
	case e := <-r.ended:
		t.Fatalf("ended %s %s instead of parking", e.Status, e.Reason)
	case <-time.After(10 * time.Second):
		t.Fatal("no park")
	}
	return nil
}

var parkSettings = Settings{Model: "sim", Tools: []protocol.Tool{execTool}, ParallelToolCalls: true,
	Instructions: "You are a careful agent.", Metadata: map[string]string{MetaCalls: "3"}}

// runRollout starts a rollout with a parkRecorder and stops it at the end of the test.
func runRollout(t *testing.T, cfg Config) (*Rollout, *parkRecorder) {
	t.Helper()
	rec := newParkRecorder()
	cfg.Sink, cfg.Model = rec, NewSim(SimOptions{})
	r := Start(context.Background(), cfg)
	t.Cleanup(func() { r.Cancel("test cleanup"); r.Wait() })
	return r, rec
}

// unpark continues p in a new goroutine with a new sink, stopped at the end of the test.
func unpark(t *testing.T, p *ParkedRollout, cfg Config) (*Rollout, *parkRecorder) {
	t.Helper()
	rec := continuing()
	cfg.Sink = rec
	if cfg.Model == nil {
		cfg.Model = NewSim(SimOptions{})
	}
	r, err := Unpark(context.Background(), cfg, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != Suspended {
		t.Fatalf("unparked rollout is %s", r.State())
	}
	go r.Run()
	t.Cleanup(func() { r.Cancel("test cleanup"); r.Wait() })
	return r, rec
}

// TestParkResumesHot: a rollout parked at its first suspension, its state sent through JSON,
// continues in a new goroutine exactly as the same rollout resumed live: same output (the
// answer's context fingerprint included), same usage (cached_tokens: the whole context before
// the input), output_index continuing; the resume encodes only the new input and renders
// none of the history.
func TestParkResumesHot(t *testing.T) {
	hist := []protocol.Item{userMsg(strings.Repeat("history ", 2000) + "then run it")}
	cfg := Config{ID: "resp_p", Settings: parkSettings, History: hist, SuspendTimeout: time.Hour}
	live, liveRec := runRollout(t, cfg)
	parked, parkRec := runRollout(t, cfg)

	ls, ps := liveRec.mustSuspend(t), parkRec.mustSuspend(t)
	if err := parked.Park(); err != nil {
		t.Fatal(err)
	}
	p := parkRec.mustPark(t)
	parked.Wait() // its goroutine ended
	if parked.State() != Parked {
		t.Fatalf("state %s", parked.State())
	}
	if err := parked.Resume(Resume{Input: outputs(ps, "x")}); !errors.Is(err, ErrParked) || !errors.Is(err, ErrNotSuspended) {
		t.Fatalf("resume of the parked value: %v", err)
	}
	if err := parked.Steer(Steer{Input: []protocol.Item{userMsg("s")}}); !errors.Is(err, ErrParked) {
		t.Fatalf("steer of the parked value: %v", err)
	}
	if p.ID != "resp_p" || len(p.Pending) != 1 || p.Pending[0] != ps.PendingCallIDs[0] || !p.Opened || len(p.Model) == 0 {
		t.Fatalf("parked %+v", p)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back ParkedRollout
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}

	r, rec := unpark(t, &back, Config{SuspendTimeout: time.Hour})
	before, beforeCalls := encodeStats.bytes.Load(), encodeStats.calls.Load()
	if err := r.Resume(Resume{Input: outputs(ps, "x")}); err != nil {
		t.Fatal(err)
	}
	hot := rec.mustSuspend(t)
	encoded := encodeStats.bytes.Load() - before
	if err := live.Resume(Resume{Input: outputs(ls, "x")}); err != nil {
		t.Fatal(err)
	}
	want := liveRec.mustSuspend(t)
	if encoded > 300 || encodeStats.calls.Load() == beforeCalls {
		t.Fatalf("the resume from parked encoded %d bytes (the history is %d)", encoded, len(hist[0].Text()))
	}
	if hot.StepUsage != want.StepUsage || hot.Usage != want.Usage {
		t.Fatalf("usage from parked %+v / %+v, live %+v / %+v", hot.StepUsage, hot.Usage, want.StepUsage, want.Usage)
	}
	if c := hot.StepUsage.InputTokensDetails.CachedTokens; c == 0 || hot.StepUsage.InputTokens-c != len(RenderItems(nil, outputs(ps, "x"))) {
		t.Fatalf("step usage %+v: not hot", hot.StepUsage)
	}
	for _, ev := range rec.Events() {
		if ev.Type == protocol.EventOutputItemAdded && ev.OutputIndex != 1 {
			t.Fatalf("output_index %d, want 1 (numbering continues)", ev.OutputIndex)
		}
	}
	// To the answer: equal contexts, equal fingerprints.
	for range 1 {
		if err := r.Resume(Resume{Input: outputs(hot, "y")}); err != nil {
			t.Fatal(err)
		}
		if err := live.Resume(Resume{Input: outputs(want, "y")}); err != nil {
			t.Fatal(err)
		}
		hot, want = rec.mustSuspend(t), liveRec.mustSuspend(t)
	}
	if err := r.Resume(Resume{Input: outputs(hot, "z")}); err != nil {
		t.Fatal(err)
	}
	if err := live.Resume(Resume{Input: outputs(want, "z")}); err != nil {
		t.Fatal(err)
	}
	he, le := rec.mustEnd(t), liveRec.mustEnd(t)
	if answerText(he.Output) != answerText(le.Output) || len(he.Output) != len(le.Output) || he.Usage != le.Usage {
		t.Fatalf("from parked:\n%s %+v\nlive:\n%s %+v", answerText(he.Output), he.Usage, answerText(le.Output), le.Usage)
	}
	if !strings.HasSuffix(answerText(he.Output), Fingerprint(RenderItems(&parkSettings, he.Context[:len(he.Context)-1]))) {
		t.Fatal("the answer's fingerprint is not that of the full context")
	}
}

// TestParkAfter: a suspended rollout parks once it has been suspended ParkAfter, not before;
// a parked rollout past its suspend timeout ends idle_timeout when it is continued.
func TestParkAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, rec := runRollout(t, Config{Settings: parkSettings, Input: []protocol.Item{userMsg("go")},
			ParkAfter: 30 * time.Second, SuspendTimeout: time.Minute})
		rec.mustSuspend(t)
		time.Sleep(30*time.Second - time.Nanosecond)
		synctest.Wait()
		if r.State() != Suspended {
			t.Fatalf("state %s before ParkAfter", r.State())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		p := rec.mustPark(t)
		if r.State() != Parked || !p.Deadline.Equal(time.Now().Add(30*time.Second)) {
			t.Fatalf("state %s deadline %v", r.State(), p.Deadline)
		}
		time.Sleep(30 * time.Second)
		_, rec2 := unpark(t, p, Config{})
		if e := rec2.mustEnd(t); e.Reason != protocol.ReasonIdleTimeout || e.Sampling {
			t.Fatalf("ending %+v", e)
		}
	})
}

// TestParkRaces: Park against Resume, Cancel and the suspend timer. Each race has exactly one
// winner: the rollout parks (and the loser finds it parked) or the other gets it (and it
// does not park).
func TestParkRaces(t *testing.T) {
	for i := range 50 {
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Settings: parkSettings, Input: []protocol.Item{userMsg("go")}}
			if i%3 == 2 {
				cfg.SuspendTimeout, cfg.ParkAfter = time.Minute, time.Minute
			}
			r, rec := runRollout(t, cfg)
			s := rec.mustSuspend(t)
			var resumeErr error
			done := make(chan struct{})
			switch i % 3 {
			case 0:
				go func() { defer close(done); resumeErr = r.Resume(Resume{Input: outputs(s, "o")}) }()
				if err := r.Park(); err != nil && !errors.Is(err, ErrNotSuspended) {
					t.Fatal(err)
				}
			case 1:
				go func() { defer close(done); r.Cancel("") }()
				_ = r.Park()
			case 2:
				close(done)
				time.Sleep(time.Minute)
			}
			<-done
			synctest.Wait()
			var p *ParkedRollout
			select {
			case p = <-rec.parked:
			default:
			}
			switch i % 3 {
			case 0:
				// Either the park won (the Resume finds it parked) or the Resume did: the
				// rollout sampled and suspended again (where the request may park it).
				if errors.Is(resumeErr, ErrParked) != (p != nil && len(rec.suspended) == 0) {
					t.Fatalf("parked %v, resume %v", p != nil, resumeErr)
				}
				if resumeErr == nil {
					rec.mustSuspend(t)
				}
			case 1, 2:
				if p != nil && r.State() != Parked || p == nil && r.State() != Ended {
					t.Fatalf("parked %v, state %s", p != nil, r.State())
				}
			}
			if p != nil {
				r.Wait()
				r2, rec2 := unpark(t, p, Config{})
				r2.Cancel("")
				if e := rec2.mustEnd(t); e.Status != protocol.ResponseIncomplete {
					t.Fatalf("ending %+v", e)
				}
			}
		})
	}
}

// stubborn is a Model whose sessions cannot park.
type stubborn struct{ *Sim }

func (s stubborn) Open(ctx context.Context, info RolloutInfo) (ModelSession, error) {
	ms, err := s.Sim.Open(ctx, info)
	return struct{ ModelSession }{ms}, err
}

// TestParkNeedsSinkAndModel: without ParkSink or Unparker, Park says so; a session without
// ParkableSession stays live; a bad value does not unpark.
func TestParkNeedsSinkAndModel(t *testing.T) {
	r, rec := start(t, Config{Settings: parkSettings, Input: []protocol.Item{userMsg("go")}})
	rec.mustSuspend(t)
	if err := r.Park(); !errors.Is(err, ErrNotParkable) {
		t.Fatalf("park without ParkSink: %v", err)
	}
	prec := newParkRecorder()
	r2 := Start(context.Background(), Config{Model: stubborn{NewSim(SimOptions{})}, Sink: prec, Settings: parkSettings, Input: []protocol.Item{userMsg("go")}})
	defer func() { r2.Cancel(""); r2.Wait() }()
	s := prec.mustSuspend(t)
	if err := r2.Park(); err != nil {
		t.Fatalf("park request: %v", err)
	}
	if err := r2.Resume(Resume{Input: outputs(s, "o")}); err != nil {
		t.Fatalf("a rollout whose session cannot park stays live: %v", err)
	}
	prec.mustSuspend(t)
	if _, err := Unpark(context.Background(), Config{Model: NewSim(SimOptions{}), Sink: newParkRecorder()},
		&ParkedRollout{Context: []protocol.Item{userMsg("x")}, Pending: []string{"call_x"}}, nil); !errors.Is(err, ErrBadParked) {
		t.Fatalf("unpark of a bad value: %v", err)
	}
}

// TestUnparkWithInput: Unpark with a Resume checks the input against the parked pending calls
// (a wrong call_id is refused, the value stays usable) and continues the rollout with it, hot.
func TestUnparkWithInput(t *testing.T) {
	r, rec := runRollout(t, Config{Settings: parkSettings, Input: []protocol.Item{userMsg("go")}})
	s := rec.mustSuspend(t)
	if err := r.Park(); err != nil {
		t.Fatal(err)
	}
	p := rec.mustPark(t)
	cfg := Config{Model: NewSim(SimOptions{}), Sink: continuing()}
	if _, err := Unpark(context.Background(), cfg, p, &Resume{Input: []protocol.Item{toolOutput("call_nope", "x")}}); err == nil {
		t.Fatal("a wrong call_id was accepted")
	} else if e, ok := protocol.AsError(err); !ok || e.Status != 400 {
		t.Fatalf("want a 400 protocol error, got %v", err)
	}
	rec2 := continuing()
	cfg.Sink = rec2
	r2, err := Unpark(context.Background(), cfg, p, &Resume{Input: outputs(s, "o")})
	if err != nil {
		t.Fatal(err)
	}
	if r2.State() != Resuming {
		t.Fatalf("state %s", r2.State())
	}
	go r2.Run()
	defer func() { r2.Cancel(""); r2.Wait() }()
	next := rec2.mustSuspend(t)
	if c := next.StepUsage.InputTokensDetails.CachedTokens; c == 0 || next.StepUsage.InputTokens-c != len(RenderItems(nil, outputs(s, "o"))) {
		t.Fatalf("step usage %+v: not hot", next.StepUsage)
	}
}

// TestReparkBeforeStep: a rollout unparked and parked again before it sampled keeps its model
// session's parked state (it never reopened it), so that its next step is hot, with the same
// usage as a rollout parked once.
func TestReparkBeforeStep(t *testing.T) {
	hist := []protocol.Item{userMsg(strings.Repeat("history ", 200) + "then run it")}
	cfg := Config{ID: "resp_r", Settings: parkSettings, History: hist, SuspendTimeout: time.Hour}
	once, onceRec := runRollout(t, cfg)
	twice, twiceRec := runRollout(t, cfg)
	s1, s2 := onceRec.mustSuspend(t), twiceRec.mustSuspend(t)
	for _, r := range []*Rollout{once, twice} {
		if err := r.Park(); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := onceRec.mustPark(t), twiceRec.mustPark(t)
	r2, rec2 := unpark(t, p2, Config{SuspendTimeout: time.Hour})
	if err := r2.Park(); err != nil {
		t.Fatal(err)
	}
	p2 = rec2.mustPark(t)
	if !p2.Opened || string(p2.Model) != string(p1.Model) {
		t.Fatalf("parked again: opened %v, %d state bytes (first park: %d)", p2.Opened, len(p2.Model), len(p1.Model))
	}
	r1, rec1 := unpark(t, p1, Config{SuspendTimeout: time.Hour})
	r2, rec2 = unpark(t, p2, Config{SuspendTimeout: time.Hour})
	if err := r1.Resume(Resume{Input: outputs(s1, "x")}); err != nil {
		t.Fatal(err)
	}
	if err := r2.Resume(Resume{Input: outputs(s2, "x")}); err != nil {
		t.Fatal(err)
	}
	h1, h2 := rec1.mustSuspend(t), rec2.mustSuspend(t)
	if h2.StepUsage != h1.StepUsage || h2.StepUsage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("step usage after two parks %+v, after one %+v", h2.StepUsage, h1.StepUsage)
	}
}
