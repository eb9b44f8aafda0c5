package sampler

import (
	"context"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// cancellingSink cancels its rollout at a chosen moment: when the step's last item is done
// (the model has returned and the step's status is decided, but the rollout has not yet
// settled on its ending), or from Ended (the rollout has settled). took is TryCancel's answer.
type cancellingSink struct {
	*sink
	r      *Rollout
	atDone bool
	took   chan bool
}

func (s *cancellingSink) Event(ev *protocol.Event) error {
	if s.atDone && ev.Type == protocol.EventOutputItemDone {
		s.took <- s.r.TryCancel("")
	}
	return s.sink.Event(ev)
}

func (s *cancellingSink) Ended(e Ending) {
	if !s.atDone {
		s.took <- s.r.TryCancel("")
	}
	s.sink.Ended(e)
}

// TestCancelAfterTheModelFinished: a cancel that reaches a rollout whose model has finished
// its last step, before the rollout settled on that ending, is accepted and is the ending
// (incomplete, cancelled, the finished item kept as it is); it used to be dropped, the rollout
// completing as if no cancel had come while the caller was told it was taken.
func TestCancelAfterTheModelFinished(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){say("done")}}
	s := &cancellingSink{sink: newSink(), atDone: true, took: make(chan bool, 1)}
	s.r = New(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("go")}})
	go s.r.Run()
	e := s.ending(t)
	if !<-s.took {
		t.Fatal("TryCancel before the rollout settled refused the cancel")
	}
	if e.Status != protocol.ResponseIncomplete || e.Reason != protocol.ReasonCancelled || e.Err != nil {
		t.Fatalf("ending %s %s %v, want incomplete cancelled", e.Status, e.Reason, e.Err)
	}
	if len(e.Output) != 1 || e.Output[0].Status != protocol.StatusCompleted || e.StepUsage.OutputTokens != 3 {
		t.Errorf("output %+v usage %+v: the finished item and its usage must stay", e.Output, e.StepUsage)
	}
	s.r.Wait()
}

// TestCancelAfterTheRolloutSettled: a cancel that comes once the rollout has settled on its
// ending is refused (TryCancel false) and changes nothing: the ending stays completed.
func TestCancelAfterTheRolloutSettled(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){say("done")}}
	s := &cancellingSink{sink: newSink(), took: make(chan bool, 1)}
	s.r = New(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("go")}})
	go s.r.Run()
	e := s.ending(t)
	if <-s.took {
		t.Fatal("TryCancel after the rollout settled took the cancel")
	}
	if e.Status != protocol.ResponseCompleted {
		t.Fatalf("ending %s %s, want completed", e.Status, e.Reason)
	}
	s.r.Wait()
}
