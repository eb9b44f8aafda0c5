package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
)

// closeGatedSim is the sim whose sessions' Close waits, while gate is set, until the test
// closes it: a rollout that parks closes its session after it became Parked and before the
// connection keeps its parked value, so the test can send a cancel into that window.
type closeGatedSim struct {
	*sim.Sim
	// gate holds the channel of the next Close to stop: that Close sends on it (it has
	// begun) and waits until the test closes it.
	gate chan chan struct{}
}

type gatedSession struct {
	sampler.ModelSession
	m *closeGatedSim
}

func (m *closeGatedSim) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	ms, err := m.Sim.Open(ctx, info)
	if err != nil {
		return nil, err
	}
	return &gatedSession{ModelSession: ms, m: m}, nil
}

// Park implements sampler.ParkableSession, as the sim's session does.
func (s *gatedSession) Park() ([]byte, error) { return s.ModelSession.(sampler.ParkableSession).Park() }

// Close stops at the gate the test armed, if any (see closeGatedSim.gate), then closes the
// sim's session.
func (s *gatedSession) Close() {
	select {
	case wait := <-s.m.gate:
		wait <- struct{}{}
		<-wait
	default:
	}
	s.ModelSession.Close()
}

// TestCancelWhileParking: a response.cancel that comes while its rollout parks (the rollout
// is Parked, the connection does not hold its parked value yet) is answered by the rollout's
// end: the park's end continues it and cancels it, and it ends incomplete, cancelled, with
// no 409 response_already_completed for that cancel, whichever of the cancel and the
// continued rollout's end comes first.
func TestCancelWhileParking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &closeGatedSim{Sim: sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant}), gate: make(chan chan struct{}, 1)}
		p, c, stop := serve(t, Options{Model: m, Limits: Limits{ParkAfter: time.Second}})
		defer stop()
		for i := range 20 {
			wait := make(chan struct{})
			m.gate <- wait
			id, _, _ := createCalls(t, p, "2")
			time.Sleep(time.Second) // ParkAfter: the rollout parks, its session's Close waits
			<-wait
			cancelled := make(chan error, 1)
			go func() { cancelled <- c.Cancel(id, "") }()
			synctest.Wait() // the cancel waits for the park to end
			close(wait)
			if err := <-cancelled; err != nil {
				t.Fatalf("round %d: the cancel of a parking rollout: %v", i, err)
			}
			fs := p.until(t, protocol.EventIncomplete)
			if got := reason(fs[len(fs)-1]); got != protocol.ReasonCancelled {
				t.Fatalf("round %d: the rollout ended incomplete, %q; want cancelled", i, got)
			}
			synctest.Wait()
			select {
			case b := <-p.out:
				t.Fatalf("round %d: after the terminal event of the cancelled rollout: %s", i, b)
			default:
			}
		}
	})
}
