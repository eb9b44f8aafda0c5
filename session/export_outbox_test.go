package session

// OutboxFrames is the number of frames queued in c's outbox that no flusher has taken yet
// (for the external tests).
func OutboxFrames(c *Conn) int {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return len(c.out.frames)
}
