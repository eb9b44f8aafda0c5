package session

import (
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// What a shape adapter outside this package (compat) sees of the rollouts and of the store,
// re-exported so that an adapter depends on session and protocol only.
type (
	// Sink receives a rollout's happenings (sampler.Sink); Route.Sink is one.
	Sink = sampler.Sink
	// Suspension is what Sink.Suspended gets (sampler.Suspension).
	Suspension = sampler.Suspension
	// Ending is what Sink.Ended gets (sampler.Ending).
	Ending = sampler.Ending
	// Steer is one response.steer as the rollout takes it (sampler.Steer).
	Steer = sampler.Steer
	// Steering is what SteerSink.Steered gets (sampler.Steering).
	Steering = sampler.Steering
	// SteerSink is the optional Sink of a shape that takes response.steer (sampler.SteerSink).
	SteerSink = sampler.SteerSink

	// Store keeps stored responses (store.Store): Options.Store.
	Store = store.Store
	// StoredResponse is a Response as the store keeps it (store.Response).
	StoredResponse = store.Response
	// BackgroundKeeper keeps background responses' records and events in a shared store
	// (store.BackgroundKeeper): Options.Background.
	BackgroundKeeper = store.BackgroundKeeper
	// BackgroundEvent is one event a BackgroundKeeper keeps (store.BackgroundEvent).
	BackgroundEvent = store.BackgroundEvent
	// BackgroundSave is one save of BackgroundKeeper.SaveBackgrounds (store.BackgroundSave).
	BackgroundSave = store.BackgroundSave
	// Page selects input items as GET /v1/responses/{id}/input_items does (store.Page).
	Page = store.Page
)

// Errors of a Store, re-exported from package store.
var (
	// ErrNotFound: the response is not stored, or not the owner's (store.ErrNotFound).
	ErrNotFound = store.ErrNotFound
	// ErrCursorNotFound: Page.After names no item of the response (store.ErrCursorNotFound).
	ErrCursorNotFound = store.ErrCursorNotFound
)

// CheckOutputs reports whether input answers exactly the pending calls (one
// function_call_output each, then messages): nil, or the 400 error saying what is wrong
// (sampler.CheckOutputs with no calls answered before).
func CheckOutputs(pending []string, input []protocol.Item) error {
	return sampler.CheckOutputs(pending, nil, input)
}
