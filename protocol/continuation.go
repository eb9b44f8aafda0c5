package protocol

// Continuation says how a create with previous_response_id was continued when it did not resume
// the parent's suspended rollout: the append shape encodes it as the "continuation" member of
// the cold turn's response.created ({"path":"cold","reason":…,"setting":…}), and both shapes
// log it. The zero value is not encoded.
type Continuation struct {
	// Path is ContinuationCold: the context was rebuilt and rendered from the chain's items.
	Path string
	// Reason is one of ColdReasons: why the rollout was not resumed.
	Reason string
	// Setting names the first setting that differs from the parent's (the Responses API's
	// member name, e.g. "metadata"); set only with ColdSettingsDiffer.
	Setting string
}

// ContinuationCold is Continuation.Path of a rebuilt continuation.
const ContinuationCold = "cold"

// Why a continuation went cold (Continuation.Reason).
const (
	// ColdSettingsDiffer: a setting that a hot continuation shares with its parent differs
	// (Continuation.Setting names it), e.g. metadata not sent again.
	ColdSettingsDiffer = "settings_differ"
	// ColdNotLatest: the parent is not the latest response of its rollout (a fork from an
	// earlier response).
	ColdNotLatest = "not_latest"
	// ColdNotSuspended: the parent's rollout is not suspended: it ended (answered and released,
	// timed out, cancelled, failed). In the append shape every continuation by
	// previous_response_id names an ended rollout: response.append is its hot path.
	ColdNotSuspended = "not_suspended"
	// ColdNotOnConnection: the parent is not on this connection (evicted from its registry,
	// from another connection, or over HTTP); it was read from the store.
	ColdNotOnConnection = "not_on_connection"
	// ColdOtherLane: the parent is in another lane (stream_id): a fork.
	ColdOtherLane = "other_lane"
	// ColdWarmUp: the create is a generate:false warm-up.
	ColdWarmUp = "warmup"
	// ColdInput: the input is not exactly one function_call_output per pending call (any
	// order), optionally followed by messages; e.g. a message before the tool outputs.
	ColdInput = "input"
)

// ColdReasons lists every Continuation.Reason, in a fixed order (metrics index by it).
var ColdReasons = [...]string{ColdSettingsDiffer, ColdNotLatest, ColdNotSuspended, ColdNotOnConnection,
	ColdOtherLane, ColdWarmUp, ColdInput}

// ColdReasonIndex returns reason's index in ColdReasons, or -1.
func ColdReasonIndex(reason string) int {
	for i, r := range ColdReasons {
		if r == reason {
			return i
		}
	}
	return -1
}

// appendContinuation appends `,"continuation":{…}` for c, nothing for nil or a zero value.
func appendContinuation(dst []byte, c *Continuation) []byte {
	if c == nil || c.Path == "" {
		return dst
	}
	dst = append(dst, `,"continuation":{"path":`...)
	dst = appendString(dst, c.Path)
	dst = append(dst, `,"reason":`...)
	dst = appendString(dst, c.Reason)
	if c.Setting != "" {
		dst = append(dst, `,"setting":`...)
		dst = appendString(dst, c.Setting)
	}
	return append(dst, '}')
}
