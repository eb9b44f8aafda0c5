package sampler

import "testing"

// steerInner is a shape's sink with every optional interface.
type steerInner struct{ *sink }

func (steerInner) SteerAccepted(Steer)            {}
func (steerInner) Steered(Steering)               {}
func (steerInner) SteerPending([]Steer, []string) {}
func (steerInner) KeepAlive() bool                { return true }
func (steerInner) StateChanged(from, to State)    {}
func (steerInner) Parked(*ParkedRollout)          {}

// wrapping is a wrapper that adds Steered and StateChanged (as the connection core's does).
type wrapping struct{ Sink }

func (s *wrapping) Unwrap() Sink                { return s.Sink }
func (s *wrapping) Steered(Steering)            {}
func (s *wrapping) StateChanged(from, to State) {}

// opaque wraps without Unwrap: what it wraps is hidden.
type opaque struct{ Sink }

func (s *opaque) StateChanged(from, to State) {}

// parkWrapping is a wrapper that declares every optional interface itself.
type parkWrapping struct{ steerInner }

func (s *parkWrapping) Unwrap() Sink { return s.steerInner }

// TestWrapperHooks: the optional interfaces are found on the Sink and down the Sinks it wraps,
// the first that has one taking it; notifications go to every Sink of the chain that has them,
// outermost first; a Sink without Unwrap hides what it wraps.
func TestWrapperHooks(t *testing.T) {
	inner := steerInner{newSink()}
	outer := &wrapping{inner}
	h := findHooks(outer)
	if h.steer != SteerSink(inner) || h.keep != KeepAliver(inner) || h.park != ParkSink(inner) {
		t.Fatalf("the inner sink's SteerSink, KeepAliver and ParkSink were not found through Unwrap: %+v", h)
	}
	if len(h.steered) != 2 || h.steered[0] != steeredObserver(outer) || h.steered[1] != steeredObserver(inner) {
		t.Fatalf("Steered goes to %v, want the wrapper then the inner sink", h.steered)
	}
	if len(h.state) != 2 || h.state[0] != StateObserver(outer) || h.state[1] != StateObserver(inner) {
		t.Fatalf("StateChanged goes to %v, want the wrapper then the inner sink", h.state)
	}

	h = findHooks(&opaque{inner})
	if h.steer != nil || h.keep != nil || h.park != nil || len(h.steered) != 0 || len(h.state) != 1 {
		t.Fatalf("a Sink without Unwrap let its inner sink's interfaces through: %+v", h)
	}

	pw := &parkWrapping{inner}
	h = findHooks(pw)
	if h.park != ParkSink(pw) || h.keep != KeepAliver(pw) || h.steer != SteerSink(pw) {
		t.Fatalf("the outermost Sink that has an interface does not take it: %+v", h)
	}
}
