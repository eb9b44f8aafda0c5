package session

// The public shape answers one Response per part of a rollout between two suspensions, each
// with its own id; a continuation resumes the suspended rollout only from the latest of them
// (the hot path). Which Response is the latest is the rollout's own state, kept here in its
// registry entry (rollout.latest) and asked of it. The Responses themselves are entries of
// the same registry (KeepResponse, kept.go); one that leaves it while it is the latest of its
// suspended rollout ends that rollout.

// SetLatest records id as the latest Response of the rollout key: the one a continuation
// resumes it by while it is suspended. "" records none (the rollout runs on, or its latest
// Response could not be kept). A key not on the connection is ignored. The shape calls it
// before it sends that Response's terminal event, so that a continuation sent after that
// event finds it.
func (c *Conn) SetLatest(key, id string) {
	c.mu.Lock()
	if h, ok := c.reg[key]; ok {
		h.latest = id
	}
	c.mu.Unlock()
}

// Latest returns the latest Response of the rollout key (SetLatest; "" when none or the key
// is not on the connection) and whether the rollout is live here: on the connection, not
// ended, not cancelled. A live rollout whose latest Response is not id has gone on past id.
func (c *Conn) Latest(key string) (id string, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.reg[key]
	if !ok || h.final {
		return "", false
	}
	return h.latest, !h.cancelled
}

// TakeLatest clears the latest Response of the rollout key when it is id and reports whether
// it did: of continuations racing to resume one suspended rollout from id, exactly one takes
// it (the hot path); the others find it gone on.
func (c *Conn) TakeLatest(key, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.reg[key]
	if !ok || h.final || id == "" || h.latest != id {
		return false
	}
	h.latest = ""
	return true
}
