package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// HTTP serves the HTTP side of the public shape: POST /v1/responses (JSON, or
// SSE with stream:true), GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.
// A POST runs on its own short-lived session.Conn, so scheduling and sampling are the same code
// as on WebSocket; previous_response_id resolves from the Store only (store:false responses are
// never resolvable over HTTP).
type HTTP struct {
	// Session configures the per-request connection core (the model, timeouts).
	Session session.Options
	// Options configures the public shape (Store, Counters). Owner is set per request.
	Options Options
	// MaxBody is the largest POST body in bytes; 0 means 32 MiB. Larger bodies get 413.
	MaxBody int64
	// WriteTimeout bounds the writing of one SSE event: a client that stops reading is cut off
	// and its rollout freed. 0 means none.
	WriteTimeout time.Duration
	// ReadTimeout bounds the reading of a POST body: a client that stalls is answered
	// request_timeout (408) and its connection closed. 0 means none.
	ReadTimeout time.Duration
	// Budget, if set, admits each POST body before it is read (its Content-Length, or MaxBody
	// when unknown), so that bodies being read and decoded stay within the server-wide memory
	// budget; over it the POST gets server_overloaded (503) at once.
	Budget *session.Budget
	// Track, if set, is told about each request's connection core while the request runs, so
	// that a server shutdown can drain it (its response then ends within the grace period);
	// the returned function is called when the request ends.
	Track func(*session.Conn) (untrack func())
	// Background, if set, serves background:true creates (background.go); nil answers them
	// unsupported_parameter.
	Background *Background
}

// Create serves POST /v1/responses for the key owner ("" when the server is open).
func (h *HTTP) Create(w http.ResponseWriter, r *http.Request, owner string) {
	body, res, err := h.ReadBody(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	p, perr := protocol.DecodeCreateParams(r.Context(), body)
	if perr != nil {
		res.Release()
		h.fail(w, perr)
		return
	}
	if p.Background != nil && *p.Background {
		if err := protocol.CheckCreate(p, protocol.PublicHTTP); err != nil {
			res.Release()
			h.fail(w, err)
			return
		}
		h.createBackground(w, r, p, res, owner)
		return
	}
	conn := session.NewConn(idleTransport{}, h.session(r, owner))
	defer conn.Close()
	if h.Track != nil {
		defer h.Track(conn)()
	}
	opts := h.Options
	reg := opts.registry(conn)
	var em emitter
	var col *collector
	if p.Stream {
		em = newSSEEmitter(w, h.WriteTimeout)
	} else {
		col = &collector{}
		em = col
	}
	ps, err := reg.create(p, em, false, opts.counters())
	res.Release() // the request is decoded; its rollout's items are counted by the rollout limits
	if err != nil {
		h.fail(w, err)
		return
	}
	select {
	case <-ps.done:
	case <-r.Context().Done():
		return
	}
	if col != nil {
		writeJSON(w, http.StatusOK, col.final)
	}
}

// session is the connection core's options of a request of owner: a continuation naming a
// background response that has not ended is response_in_progress (Background.InProgress).
func (h *HTTP) session(r *http.Request, owner string) session.Options {
	sess := h.Session
	sess.Owner = owner
	sess.QuotaKey = session.QuotaKey(owner, r.RemoteAddr)
	if h.Background != nil {
		sess.InProgress = h.Background.InProgress
	}
	return sess
}

// ReadBody admits and reads a POST body, for every route that decodes one (POST
// /v1/responses, /v1/responses/compact, /v1/chat/completions): request_body_too_large (413)
// for a Content-Length over MaxBody before reading anything; request_timeout (408) when the
// body's first byte does not come within ReadTimeout, or the rest of it within ReadTimeout of
// the first byte; server_overloaded (503) when the Budget is in use. Nothing of the Budget is
// held until the first byte of the body has come, so that requests that send their headers
// and no body hold neither a decoding slot nor memory. The returned reservation
// (session.DecodeCost of the body) is to be released once the body has been decoded.
func (h *HTTP) ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, _ *session.Reservation, _ error) {
	max := h.MaxBody
	if max <= 0 {
		max = session.DefaultMaxFrame
	}
	if r.ContentLength > max {
		w.Header().Set("Connection", "close") // the body is not read, not even to discard it
		return nil, nil, bodyTooLarge(max)
	}
	rc := http.NewResponseController(w)
	if h.ReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(h.ReadTimeout))
	}
	var first [1]byte
	n, err := 0, error(nil)
	if r.ContentLength != 0 {
		n, err = io.ReadFull(r.Body, first[:])
		if errors.Is(err, io.EOF) && r.ContentLength < 0 {
			err = nil // an empty chunked body
		}
	}
	var res *session.Reservation
	if err == nil {
		size := r.ContentLength
		if size < 0 {
			size = max // unknown length (chunked): reserve the limit
		}
		var aerr error
		if res, aerr = h.Budget.AdmitBody(session.ShareKeyFrom(r.Context()), size); aerr != nil {
			w.Header().Set("Connection", "close") // the rest of the body is not read
			return nil, nil, aerr
		}
		if h.ReadTimeout > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(h.ReadTimeout)) // from the body's first byte
		}
		body, err = readAtMost(r.Body, first[:n], r.ContentLength, max)
	}
	if !isTimeout(err) {
		h.clearReadDeadline(rc)
	}
	switch {
	case isTimeout(err):
		// The deadline stays, so that the server does not wait for the rest of the body either.
		res.Release()
		w.Header().Set("Connection", "close")
		return nil, nil, protocol.Errorf(http.StatusRequestTimeout, protocol.CodeRequestTimeout, "",
			"The request body was not received within %s.", h.ReadTimeout)
	case err != nil:
		res.Release()
		return nil, nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "Could not read the request body: %v.", err)
	case int64(len(body)) > max:
		res.Release()
		return nil, nil, bodyTooLarge(max)
	case !res.Cover(session.DecodeCost(body)):
		res.Release()
		return nil, nil, session.BudgetFullError("this request body")
	}
	return body, res, nil
}

// clearReadDeadline removes the read deadline of ReadBody: one left behind would cancel the
// request.
func (h *HTTP) clearReadDeadline(rc *http.ResponseController) {
	if h.ReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
}

// readAtMost reads the rest of a body of Content-Length n (-1: unknown) whose first bytes
// are read, and at most max+1 bytes in all. A known length is read into a buffer of exactly
// that size, so a body in progress holds no more than its length (growing by doubling would
// hold up to twice as much).
func readAtMost(body io.Reader, read []byte, n, max int64) ([]byte, error) {
	if n < 0 {
		return protocol.ReadAll(io.MultiReader(bytes.NewReader(read), io.LimitReader(body, max+1-int64(len(read)))))
	}
	buf := make([]byte, n)
	if len(read) > 0 {
		// Not right after the make: the compiler fuses make-then-copy into one call that
		// zeroes the rest of a large buffer in a step the scheduler cannot preempt.
		copy(buf, read)
	}
	if _, err := io.ReadFull(body, buf[len(read):]); err != nil {
		return nil, err
	}
	return buf, nil
}

// bodyTooLarge is the 413 of a body over max bytes. Its message names the limit in those words
// ("exceeds the limit of N bytes"): tether conform reads the frame limit from it.
func bodyTooLarge(max int64) *protocol.Error {
	return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeBodyTooLarge, "",
		"The request body exceeds the limit of %d bytes.", max)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fail writes the payload of err (protocol.ErrorOf; the server's access log counts it in
// tether_errors_total). err must not be nil.
func (h *HTTP) fail(w http.ResponseWriter, err error) {
	WriteError(w, protocol.ErrorOf(err)) // counted in tether_errors_total by the server's access log
}

// collector keeps only the terminal Response (stream:false).
type collector struct{ final *protocol.Response }

func (c *collector) emit(ev *protocol.Event) error {
	switch ev.Type {
	case protocol.EventCompleted, protocol.EventIncomplete, protocol.EventFailed:
		r := *ev.Response
		c.final = &r
	}
	return nil
}

func (c *collector) errorFrame(*protocol.Error) {}

// sseEmitter writes each event as one SSE event ("event: T\ndata: JSON\n\n", LF only), in one
// write followed by a flush; no [DONE].
type sseEmitter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	data    []byte
	buf     []byte
}

func newSSEEmitter(w http.ResponseWriter, timeout time.Duration) *sseEmitter {
	return &sseEmitter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (s *sseEmitter) emit(ev *protocol.Event) error {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	s.data = protocol.AppendEvent(s.data[:0], ev)
	s.buf = protocol.AppendSSE(s.buf[:0], string(ev.Type), s.data)
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseEmitter) errorFrame(*protocol.Error) {}

// idleTransport is the transport of an HTTP request's connection core: it carries no frames.
type idleTransport struct{}

func (idleTransport) Read(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (idleTransport) Write(context.Context, []byte) error    { return nil }
func (idleTransport) Close(protocol.CloseCode, string) error { return nil }
func (idleTransport) Abort() error                           { return nil }

func notFound(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "", "Response with id '%s' not found.", id)
}

// storeError answers a store error: 404 response_not_found, or 503 store_unavailable.
func storeError(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, session.ErrNotFound) {
		WriteError(w, notFound(id))
		return
	}
	WriteError(w, session.StoreUnavailable())
}

// Get serves GET /v1/responses/{id}: the stored Response, or 404; for a background response
// of this server its snapshot while it runs, and with stream its events (getBackground), and
// once it has ended its terminal Response while its events are kept when the store does not
// have it (a failed Response is not stored); for one that runs on another instance sharing the
// store, its record there (bgshared.go).
func (h *HTTP) Get(w http.ResponseWriter, r *http.Request, id, owner string) {
	if h.getBackground(w, r, id, owner) {
		return
	}
	st := h.Options.Store
	if st == nil {
		WriteError(w, notFound(id))
		return
	}
	sr, err := st.Get(r.Context(), id, owner)
	if errors.Is(err, session.ErrNotFound) && h.getShared(w, r, id, owner) {
		return // a background response running on another instance, or one that did not reach the store
	}
	if errors.Is(err, session.ErrNotFound) && h.getEndedBackground(w, r, id, owner) {
		return // a background response of this server that ended without being stored (failed)
	}
	if err != nil {
		storeError(w, id, err)
		return
	}
	size := session.ResponseBytes(&sr.Response)
	// Encoded once into a buffer of about its size and written as is: encoding/json would
	// copy a large Response three times more (compact, copy out, newline), and a copy of
	// tens of MiB is a step the scheduler cannot preempt.
	h.writeCounted(w, r, size, func() ([]byte, error) {
		return sr.Response.AppendJSON(make([]byte, 0, size+size/8+64)), nil
	})
}

// stored returns the stored response id of owner, or writes the error (404 with no store or
// no such response, the store's failure) and returns false.
func (h *HTTP) stored(w http.ResponseWriter, r *http.Request, id, owner string) (*session.StoredResponse, bool) {
	st := h.Options.Store
	if st == nil {
		WriteError(w, notFound(id))
		return nil, false
	}
	sr, err := st.Get(r.Context(), id, owner)
	if err != nil {
		storeError(w, id, err)
		return nil, false
	}
	return sr, true
}

// writeCounted writes the text encode returns (an answer of about size bytes) to r's client
// as writeEncoded does, while the Budget counts its encoding (session.DecodeFactor per byte: the encoded
// answer and what the store decoded) until the write has ended, when the client has read it
// or the write timeout has cut it; server_overloaded (503) when that does not fit.
func (h *HTTP) writeCounted(w http.ResponseWriter, r *http.Request, size int64, encode func() ([]byte, error)) {
	n := session.DecodeFactor * size
	if !h.Budget.TryReserve(n) {
		WriteError(w, session.BudgetFullError("this answer"))
		return
	}
	defer h.Budget.Release(n)
	writeEncoded(w, r, size, encode)
}

// writeEncoded runs encode, the encoding of an answer of about size bytes to r, in a
// heavy-work slot (protocol.CPUSlot) and writes its text as a 200 JSON answer; a
// *protocol.Error from encode (the request's own, found while encoding) is answered as it
// is, any other error as a 500 server_error. The slot is given back before the write, which
// waits for the client. A client that goes away while the answer waits for a slot is recorded as
// client_closed_request (499), and the answer is not encoded.
func writeEncoded(w http.ResponseWriter, r *http.Request, size int64, encode func() ([]byte, error)) {
	release, perr := protocol.HeavySlot(r.Context(), int(size))
	if perr != nil {
		WriteError(w, perr)
		return
	}
	b, err := encode()
	release()
	if perr, ok := protocol.AsError(err); ok {
		WriteError(w, perr) // a request's error found while encoding
		return
	}
	if err != nil {
		WriteError(w, encodeError(err))
		return
	}
	writeBody(w, http.StatusOK, b)
}

// Delete serves DELETE /v1/responses/{id}: {"id","object":"response","deleted":true}, or 404.
// A background response that has not ended is 409 response_in_progress (bgrunning.go); one
// that has ended goes with its kept events, so that neither GET nor its stream answers it
// any more. A store that fails is 503 store_unavailable, and this instance then forgets
// nothing: the response stays readable until a DELETE succeeds.
func (h *HTTP) Delete(w http.ResponseWriter, r *http.Request, id, owner string) {
	st := h.Options.Store
	if st == nil {
		WriteError(w, notFound(id))
		return
	}
	ctx := r.Context()
	if h.Background.InProgress(ctx, id, owner) {
		WriteError(w, inProgress(id))
		return
	}
	run, err := h.deleteStored(ctx, st, id, owner)
	if err != nil {
		storeError(w, id, err)
		return
	}
	if run != nil {
		h.Background.forget(run) // only now: every store call has succeeded
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}

// deleteStored deletes what st keeps of response id of owner: its record on a shared store,
// then its stored Response. A failed background response is not in st: its record, and the
// copy of the instance that ran it, are all there is (GET answers from either). It returns
// that copy when this instance keeps one (nil: none), for the caller to forget once all went
// well; ErrNotFound when nothing has the response; another error when a store call failed.
// The record goes first: should the Response's deletion then fail, the Response still answers
// GET, its items and continuations as before, and a DELETE again completes it.
func (h *HTTP) deleteStored(ctx context.Context, st session.Store, id, owner string) (*bgRun, error) {
	run := h.Background.endedRun(id, owner)
	recorded, err := h.deleteRecord(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	err = st.Delete(ctx, id, owner)
	if errors.Is(err, session.ErrNotFound) && (run != nil || recorded) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return run, nil
}

// deleteRecord deletes the record of background response id of owner from the shared store,
// which would answer GET in place of a deleted Response, and reports whether there was one;
// false and nil without a shared store.
func (h *HTTP) deleteRecord(ctx context.Context, id, owner string) (bool, error) {
	b := h.shared()
	if b == nil {
		return false, nil
	}
	switch err := b.Shared.DeleteBackground(ctx, owner, id); {
	case errors.Is(err, session.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// InputItems serves GET /v1/responses/{id}/input_items: {"object":"list","data","first_id",
// "last_id","has_more"} with limit (1–100, default 20), order (asc|desc, default desc) and
// after (an item id) as OpenAI's API does.
func (h *HTTP) InputItems(w http.ResponseWriter, r *http.Request, id, owner string) {
	q := r.URL.Query()
	page := session.Page{Limit: 20, Desc: true, After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			h.fail(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "limit", "limit must be an integer from 1 to 100."))
			return
		}
		page.Limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		page.Desc = false
	default:
		WriteError(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "order", "order must be 'asc' or 'desc'."))
		return
	}
	st := h.Options.Store
	if st == nil {
		WriteError(w, notFound(id))
		return
	}
	got, err := st.InputItems(r.Context(), id, owner, page)
	if errors.Is(err, session.ErrCursorNotFound) {
		WriteError(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "after", "No input item with id '%s' in this response.", page.After))
		return
	}
	if err != nil {
		storeError(w, id, err)
		return
	}
	list := struct {
		Object  string          `json:"object"`
		Data    []protocol.Item `json:"data"`
		FirstID *string         `json:"first_id"`
		LastID  *string         `json:"last_id"`
		HasMore bool            `json:"has_more"`
	}{Object: "list", Data: got.Items, HasMore: got.HasMore}
	if list.Data == nil {
		list.Data = []protocol.Item{}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	h.writeCounted(w, r, session.ItemsBytes(list.Data), func() ([]byte, error) { return json.Marshal(list) })
}

// WriteError writes e as the HTTP answer: protocol.WriteHTTPError.
func WriteError(w http.ResponseWriter, e *protocol.Error) { protocol.WriteHTTPError(w, e) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, encodeError(err))
		return
	}
	writeBody(w, status, b)
}

// writeBody writes the JSON text b and a newline as the answer, without copying b.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if _, err := w.Write(b); err == nil {
		_, _ = w.Write(newline)
	}
}

var newline = []byte{'\n'}

// encodeError is the 500 server_error of an answer that could not be encoded.
func encodeError(err error) *protocol.Error {
	return &protocol.Error{Status: http.StatusInternalServerError, Type: protocol.TypeServer,
		Code: protocol.CodeServerError, Message: "Could not encode the response: " + err.Error()}
}
