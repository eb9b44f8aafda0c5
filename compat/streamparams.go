package compat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/tetherd/tether/protocol"
)

// maxGetBody bounds the JSON body of a GET of a response, in bytes.
const maxGetBody = 4096

// streamParams reads the parameters of a GET /v1/responses/{id}: stream and starting_after,
// each from the query (stream=true, starting_after=N) or, when the query does not have it,
// from a small JSON body ({"stream": true, "starting_after": N}; openai-go sends stream
// there). after is -1 without starting_after. Errors: invalid_value for a query value that is
// not a boolean or not an integer ≥ 0, invalid_type for a body member of the wrong type (or a
// negative starting_after there: invalid_value), invalid_json for a body that is not a JSON
// object, request_body_too_large past maxGetBody.
func streamParams(r *http.Request) (stream bool, after int, _ *protocol.Error) {
	q := r.URL.Query()
	sv, av := q.Get("stream"), q.Get("starting_after")
	var body struct {
		Stream        json.RawMessage `json:"stream"`
		StartingAfter json.RawMessage `json:"starting_after"`
	}
	if sv == "" || av == "" {
		if err := readGetBody(r, &body); err != nil {
			return false, -1, err
		}
	}
	stream, err := streamParam(sv, body.Stream)
	if err != nil {
		return false, -1, err
	}
	after, err = afterParam(av, body.StartingAfter)
	return stream, after, err
}

// readGetBody decodes the JSON body of a GET, if it has one, into v.
func readGetBody(r *http.Request, v any) *protocol.Error {
	if r.ContentLength == 0 || r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxGetBody+1))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if len(b) > maxGetBody {
		return bodyTooLarge(maxGetBody)
	}
	if b = bytes.TrimSpace(b); b[0] != '{' || json.Unmarshal(b, v) != nil {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "The body of a GET must be a JSON object.")
	}
	return nil
}

// streamParam is stream from the query value q, else from the body member b.
func streamParam(q string, b json.RawMessage) (bool, *protocol.Error) {
	if q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "stream", "stream must be true or false.")
		}
		return v, nil
	}
	if isNull(b) {
		return false, nil
	}
	var v bool
	if json.Unmarshal(b, &v) != nil {
		return false, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidType, "stream", "stream must be a boolean.")
	}
	return v, nil
}

// afterParam is starting_after from the query value q, else from the body member b; -1
// without one.
func afterParam(q string, b json.RawMessage) (int, *protocol.Error) {
	invalid := protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "starting_after",
		"starting_after must be a non-negative integer (a sequence_number).")
	if q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			return -1, invalid
		}
		return n, nil
	}
	if isNull(b) {
		return -1, nil
	}
	var n int
	if json.Unmarshal(b, &n) != nil {
		return -1, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidType, "starting_after",
			"starting_after must be an integer (a sequence_number).")
	}
	if n < 0 {
		return -1, invalid
	}
	return n, nil
}

// isNull reports whether a JSON member is absent or null.
func isNull(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }
