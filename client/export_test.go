package client

// LinkDone returns a channel closed when the Conn's current WebSocket has ended (its reader
// exited). Tests use it to wait for the server's age limit without sleeping.
func (c *Conn) LinkDone() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.link.done
}
