package sampler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
)

// gatedSink is a sink whose Ended waits for gate, as the server's does for the lane's turn
// while another turn holds it, and which cancels its rollout the moment a Resume has claimed
// the suspension (StateObserver, on the resuming goroutine): the rollout's goroutine then
// ends although a Resume is on its way to it.
type gatedSink struct {
	*sink
	r    *Rollout
	gate chan struct{}
}

func (s *gatedSink) Ended(e Ending) {
	<-s.gate
	s.sink.Ended(e)
}

func (s *gatedSink) StateChanged(from, to State) {
	if to == Resuming {
		s.r.Cancel(protocol.ReasonServerShutdown)
	}
}

// TestResumeLosingToTheEndReturns: a Resume that claimed the suspension while the rollout was
// being cancelled returns (ErrEnded, or nil when the input was taken first) as soon as the
// rollout has ended or taken it, without waiting for
// Sink.Ended, which may itself wait for the turn that Resume's Ticket holds (the server
// releases it when Resume fails). Were Resume to wait for the rollout's goroutine to exit
// instead, each would wait for the other for ever.
func TestResumeLosingToTheEndReturns(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){call("f", "c1"), say("done")}}
	s := &gatedSink{sink: newSink(), gate: make(chan struct{})}
	s.r = New(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("go")}})
	go s.r.Run()
	s.suspension(t)
	res := make(chan error, 1)
	go func() { res <- s.r.Resume(Resume{Input: []protocol.Item{toolOutput("c1", "one")}}) }()
	taken := false
	select {
	case err := <-res:
		taken = err == nil
		// The rollout's goroutine may take the input in the instant before it sees the cancel
		// (its select has both ready): then Resume's answer is nil and the rollout ends all
		// the same. Either way Resume must return.
		if err != nil && !errors.Is(err, ErrEnded) {
			t.Fatalf("Resume: %v, want ErrEnded or nil", err)
		}
	case <-time.After(10 * time.Second):
		close(s.gate)
		t.Fatal("Resume still waits for a rollout that has ended")
	}
	close(s.gate) // the Ticket given back: the terminal event's turn comes
	if e := s.ending(t); !taken && e.Reason != protocol.ReasonServerShutdown {
		t.Fatalf("ended %s %s, want incomplete server_shutdown", e.Status, e.Reason)
	}
	s.r.Wait()
}
