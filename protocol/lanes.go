package protocol

import (
	"context"
	"net/http"
)

// Lanes (stream_id) of OpenAI's WebSocket mode.
const (
	// CodeInvalidStreamID (400, param "stream_id", no stream_id on the envelope): a stream_id
	// that is empty, longer than MaxStreamIDLength or not of [A-Za-z0-9_.-].
	CodeInvalidStreamID = "invalid_stream_id"
	// CodeStreamLimit (400, param "stream_id", the envelope echoes the rejected stream_id): a
	// create naming a new lane when the connection has used its limit of distinct named lanes
	// (-max-lanes, 32 by default); the default lane is not counted and a lane's name is never
	// freed.
	CodeStreamLimit = "websocket_stream_limit_reached"
	// MaxStreamIDLength is the longest stream_id, in bytes.
	MaxStreamIDLength = 256
)

// CheckStreamID validates a stream_id: 1 to 256 characters of letters,
// digits, "_", "-" and ".". nil (absent or null) is the default lane and is valid. The error is
// invalid_stream_id (400).
func CheckStreamID(id *string) *Error {
	if id == nil {
		return nil
	}
	s := *id
	ok := len(s) >= 1 && len(s) <= MaxStreamIDLength
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
	}
	if ok {
		return nil
	}
	return Errorf(http.StatusBadRequest, CodeInvalidStreamID, "stream_id",
		"The 'stream_id' field must be a non-empty string with at most %d characters and may only contain letters, numbers, underscores, hyphens, and periods.", MaxStreamIDLength)
}

// StreamLimitError is websocket_stream_limit_reached for a create naming a new lane id past the
// connection's limit of max distinct named lanes; it is attributed to id.
func StreamLimitError(max int, id string) *Error {
	e := Errorf(http.StatusBadRequest, CodeStreamLimit, "stream_id",
		"This WebSocket connection has reached its maximum number of distinct stream IDs (%d). Reuse an existing stream_id or open a new WebSocket connection.", max)
	e.StreamID = id
	return e
}

// InLane returns err attributed to the lane streamID: the *Error it holds is copied with
// StreamID set, so its envelope carries stream_id ("" is the default lane and carries none).
// nil stays nil; an error holding no *Error is returned unchanged.
func InLane(err error, streamID string) error {
	if err == nil || streamID == "" {
		return err
	}
	e, ok := AsError(err)
	if !ok || e == nil {
		return err
	}
	c := *e
	c.StreamID = streamID
	return &c
}

// StreamIDOf returns the lane of a response.create frame that failed to decode, so that its
// error can carry the lane: the top-level "stream_id" string when it is a
// valid lane name, else "" (also for a frame that is not a JSON object). It reads the frame
// again, in a heavy-work slot when it is large (CPUSlot; "" when ctx ends before one is
// free); it is meant for the error path only.
func StreamIDOf(ctx context.Context, data []byte) string {
	release, cerr := CPUSlot(ctx, len(data))
	defer release()
	if cerr != nil {
		return ""
	}
	lane, found := "", false
	err := decodeText(data, "frame", true, func(d *dec) *Error {
		if d.kind() != '{' {
			return errSyntax
		}
		return d.object(func(key []byte) *Error {
			if string(key) == "stream_id" && d.kind() == '"' && !found {
				lane, found = d.str(), true
				return nil
			}
			return d.skipUnchecked()
		})
	})
	if err != nil || CheckStreamID(&lane) != nil {
		return ""
	}
	return lane
}

// LaneOf returns the lane of a decoded create: its stream_id when valid, "" for the default
// lane or an invalid name (whose invalid_stream_id error names no lane).
func (p *CreateParams) LaneOf() string {
	if p.StreamID == nil || CheckStreamID(p.StreamID) != nil {
		return ""
	}
	return *p.StreamID
}
