package compat

import "github.com/tetherd/tether/protocol"

// segment is one public Response: the part of a rollout between two
// suspensions, with its own id and sequence_number space. Once it has ended it is the value
// of its entry in the connection's one registry (session.Conn.KeepResponse), an alias of its
// rollout: the registry bounds and evicts it with the connection's other entries, and a
// suspended rollout whose latest segment is evicted ends there.
type segment struct {
	// Immutable once the segment has ended
	id       string
	rollout  string // the session key of its rollout
	lane     string // stream_id of its create; "" is the default lane
	settings []byte // the settings key of its request (encodeSettings)
	chain    []protocol.Item
	pending  []string // call_ids left open at its end
	// suspended: it ended at a suspension of its rollout, so pending is every call its chain
	// leaves open (sampler.Suspension.PendingCallIDs), not only those of its last step
	suspended bool
	// unlisted: its chain leaves open a call the client made itself (a function_call of an
	// input, never answered). A rollout's pending lists only the calls it made, so a
	// continuation of this segment must walk the chain to demand that call's output.
	unlisted bool
	steered  []protocol.Item // guarded by registry.mu: input of steers pending on its calls (response.steer.pending), which a cold continuation appends
	// steeredTo is guarded by registry.mu: the id of the successor that went on from this
	// segment after a steer cut it short ("" when none), for steers that still name it.
	steeredTo string
	bytes     int64 // estimate of the items this segment added (input + output)
}
