package session

import "testing"

// TestDropPeerOnce: the write watchdog and the ping loop can each find the same peer dead
// before its connection has closed (a server dropped 60 stalled readers 66 times);
// the peer is dropped, counted in PeersDropped and logged once, with the first reason.
func TestDropPeerOnce(t *testing.T) {
	m := &Metrics{}
	tr := newPipe()
	c := NewConn(tr, Options{Metrics: m})
	defer c.Close()
	c.dropPeer("write timeout: the client is not reading")
	c.dropPeer("no pong within 30s")
	if n := m.PeersDropped.Load(); n != 1 {
		t.Fatalf("peers dropped %d, want 1", n)
	}
}
