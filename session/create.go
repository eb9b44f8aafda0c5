package session

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// A Shape is a wire shape's part in Conn.Create: where it keeps the responses of the
// connection, how it answers, and whether a continuation resumes a suspended rollout (the hot
// path) or starts a new one. The append adapter of this package and the public adapter of
// compat implement it; Conn.Create does everything else.
type Shape interface {
	// Where is the surface the create arrived on: it selects the rules of protocol.CheckCreate;
	// lanes (stream_id) exist only over WebSocket.
	Where() protocol.Where
	// Parent returns the chain of cr.Parent (the previous_response_id) when the shape keeps
	// that response on the connection; found false sends the lookup on to Options.Store. A
	// non-nil error (response_in_progress) answers the create. It may set cr.Answered.
	Parent(cr *Create) (chain []protocol.Item, found bool, err error)
	// Rejected is told that the input of cr does not continue the chain Parent returned
	// (protocol.CheckContinuation failed; that error answers the create).
	Rejected(cr *Create)
	// Route decides how the checked create cr runs and records it in the shape. cr.Cold is
	// set when the create already has to start a new rollout (a new chain has no parent; a
	// parent read from the store, or a hot path that failed, has cr.Cold set): Route then
	// returns a Route without Resume. Otherwise Route may set cr.Cold to say why it starts a
	// new rollout.
	Route(cr *Create) Route
}

// A Create is one create request on its way through Conn.Create: checked, its input
// expanded, its parent resolved.
type Create struct {
	// ID is the new Response's id ("resp_…"), the key of its rollout when one starts.
	ID string
	// Params is the request. Its Input has item references resolved and compaction items
	// expanded; a Shape's Route may append to it (items that a continuation carries on).
	Params *protocol.CreateParams
	// Lane is the create's stream_id ("" for the default lane, and always over HTTP).
	Lane string
	// Response is the Response as created (protocol.NewResponse), not yet finished.
	Response protocol.Response
	// Parent is the previous_response_id, "" for a new chain; History is its chain of items
	// (history, inputs and outputs in order) once resolved.
	Parent  string
	History []protocol.Item
	// Cold, when not nil, says why a continuation starts a new rollout from History + input
	// (the cold path) instead of resuming its parent's.
	Cold *protocol.Continuation
	// Answered is set by Shape.Parent when it knows the input continues History: the parent
	// ended at a suspension whose pending calls are every call History leaves open, and the
	// input is exactly one output for each (CheckOutputs), then messages. Create then does not
	// walk History again (protocol.CheckContinuation), a cost that grows with the chain.
	Answered bool
}

// A Route is how a create runs, as its Shape decides (Shape.Route).
type Route struct {
	// Resume, when not "", is the key of the suspended rollout the create continues (the hot
	// path). Otherwise a new rollout keyed Create.ID runs on Create.History followed by the
	// input.
	Resume string
	// Sink receives the new rollout's events; SuspendOnAnswer and StartSuspended are the new
	// rollout's sampler.Config fields. None is used on the hot path.
	Sink            sampler.Sink
	SuspendOnAnswer bool
	StartSuspended  bool
	// Undo, when set, is called when the rollout could not be started or resumed, so that
	// the shape forgets what Route recorded. On the hot path it reports whether the create was
	// answered meanwhile (the rollout ended and its sink answered the create): Create then
	// succeeds.
	Undo func() (answered bool)
}

// Create runs one create request p for shape s, the one entry point of both shapes: it
// checks the request (CheckFormat, protocol.CheckCreate), resolves item references and
// expands compaction items, runs the backend's checks (CheckModel), resolves
// previous_response_id (the shape's registry on the connection, then Options.Store), checks
// that the input continues the parent's chain (protocol.CheckContinuation), then resumes the
// parent's suspended rollout or starts a new one (Start), as the shape routes it. A hot path
// whose rollout ended meanwhile is rebuilt on a new rollout (cold, not_suspended).
//
// Errors are request-scoped *protocol.Error values attributed to the create's lane (except
// invalid_stream_id); nothing was started then, and the shape's Undo has run.
func (c *Conn) Create(p *protocol.CreateParams, s Shape) error {
	where := s.Where()
	lane := p.LaneOf() // every error but invalid_stream_id carries the lane
	if where == protocol.PublicHTTP {
		lane = "" // HTTP has no lanes (stream_id is unsupported_parameter there)
	}
	if err := CheckFormat(p); err != nil {
		return protocol.InLane(err, lane)
	}
	if err := protocol.CheckCreate(p, where); err != nil {
		return protocol.InLane(err, lane)
	}
	return protocol.InLane(c.create(p, s, lane), lane)
}

// create is Create after the checks that cannot be attributed to a lane.
func (c *Conn) create(p *protocol.CreateParams, s Shape, lane string) error {
	input, err := ResolveItemRefs(c.ctx, p.Input, c.Items, c.opts.Store, c.opts.Owner)
	if err == nil {
		input, err = c.opts.Compaction.Expand(input)
	}
	if err != nil {
		return err
	}
	p.Input = input
	if err := c.CheckModel(p); err != nil { // the backend sees the items it will get
		return err
	}
	id := protocol.NewID("resp")
	cr := &Create{ID: id, Params: p, Lane: lane, Response: protocol.NewResponse(id, p, time.Now().Unix())}
	if p.PreviousResponseID != nil {
		cr.Parent = *p.PreviousResponseID
	}
	if err := c.resolveParent(cr, s); err != nil {
		return err
	}
	route := s.Route(cr)
	if route.Resume != "" {
		err := c.Resume(route.Resume, p.Input)
		if err == nil {
			return nil
		}
		if route.Undo != nil && route.Undo() {
			return nil // the rollout ended meanwhile and its sink answered the create
		}
		if e, ok := protocol.AsError(err); !ok || (e.Code != protocol.CodeResponseNotSuspended && e.Code != protocol.CodeResponseNotFound) {
			return err
		}
		cr.Cold = cold(protocol.ColdNotSuspended) // rebuild it
		route = s.Route(cr)
	}
	if cr.Cold != nil {
		c.logCold(id, cr.Parent, cr.Cold)
	}
	err = c.Start(StartRequest{Key: id, Config: sampler.Config{
		ID:              id,
		Settings:        sampler.SettingsFrom(p),
		History:         cr.History,
		Input:           p.Input,
		Sink:            route.Sink,
		SuspendOnAnswer: route.SuspendOnAnswer,
		StartSuspended:  route.StartSuspended,
	}, SettingsBytes: SettingsBytes(p), Lane: lane})
	if err != nil && route.Undo != nil {
		route.Undo()
	}
	return err
}

// resolveParent is the one resolver of previous_response_id: the shape's registry on the
// connection (Shape.Parent), then Options.Store (StoredChain, the cold path with reason
// not_on_connection). It sets cr.History and checks that the input continues it; a new chain
// (no parent) is checked against an empty history.
func (c *Conn) resolveParent(cr *Create, s Shape) error {
	input := cr.Params.Input
	if cr.Parent == "" {
		return protocol.CheckContinuation(nil, input)
	}
	chain, found, err := s.Parent(cr)
	if err != nil {
		return err
	}
	if !found {
		if chain, err = StoredChain(c.ctx, c.opts.Store, cr.Parent, c.opts.Owner); err != nil {
			return c.runningParent(cr.Parent, err)
		}
		cr.Cold = cold(protocol.ColdNotOnConnection)
	}
	cr.History = chain
	if cr.Answered {
		return nil
	}
	if err := protocol.CheckContinuation(chain, input); err != nil {
		if found {
			s.Rejected(cr)
		}
		return err
	}
	return nil
}

// runningParent is err, the error of the store's lookup of parent, unless that is
// previous_response_not_found and parent runs outside the connection (Options.InProgress):
// then ParentRunning.
func (c *Conn) runningParent(parent string, err error) error {
	perr, ok := protocol.AsError(err)
	if !ok || perr.Code != protocol.CodePreviousNotFound || c.opts.InProgress == nil ||
		!c.opts.InProgress(c.ctx, parent, c.opts.Owner) {
		return err
	}
	return ParentRunning(parent)
}

// ParentRunning is the response_in_progress error (409, param previous_response_id) of a
// create whose previous_response_id names response id, which has not ended (a background
// response that is queued or running): it is continued once it has ended.
func ParentRunning(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseInProgress, "previous_response_id",
		"Previous response with id '%s' has not finished yet: send the continuation after its terminal event.", id)
}

// StoredChain reads the chain of the stored response id of owner from st (Store.Chain):
// previous_response_not_found (400) when st is nil or does not hold it (naming the missing
// response of its chain), store_unavailable (503) when st fails.
func StoredChain(ctx context.Context, st Store, id, owner string) ([]protocol.Item, error) {
	if st == nil {
		return nil, PreviousNotFound(id, nil)
	}
	chain, err := st.Chain(ctx, id, owner)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, PreviousNotFound(id, err)
	case err != nil:
		return nil, StoreUnavailable()
	}
	return chain, nil
}

// Persist is the one writer of stored responses: it writes the finished Response final to
// Options.Store when the connection has one and final is to be kept (store:true, not failed),
// owned by Options.Owner and counted against Options.QuotaKey. input are the items the
// response added (given ids when they have none); chain, when not nil, is the whole chain
// through final (store.Response.Chain: an append-shape rollout interleaves inputs and
// outputs). It returns false when the store refused the write: the caller then ends the
// response failed with StoreFailed. The write does not end with the connection: a response
// that a disconnect ended is stored all the same (the store's own timeout bounds it).
func (c *Conn) Persist(final *protocol.Response, input, chain []protocol.Item) bool {
	st := c.opts.Store
	if st == nil || !final.Store || final.Status == protocol.ResponseFailed {
		return true
	}
	r := &store.Response{Response: *final, Owner: c.opts.Owner, Quota: c.opts.QuotaKey, Chain: chain, Input: protocol.WithIDs(input)}
	return st.Put(context.WithoutCancel(c.ctx), r) == nil
}

// CheckModel runs the backend's validation of a create request (sampler.RequestChecker, e.g.
// the sim's "sim.*" metadata keys): an error holding a 400 *protocol.Error, or nil.
func (c *Conn) CheckModel(p *protocol.CreateParams) error {
	return sampler.CheckRequest(c.opts.Model, p)
}

// cold is a cold-path continuation for reason.
func cold(reason string) *protocol.Continuation {
	return &protocol.Continuation{Path: protocol.ContinuationCold, Reason: reason}
}

// parentInProgress is response_in_progress (409) for a previous_response_id whose response
// has not ended.
func parentInProgress(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseInProgress, "previous_response_id",
		"Response %s has not ended: continue it with response.append, or cancel it first.", id)
}
