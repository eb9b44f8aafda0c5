//go:build !linux

package chat_test

import (
	"net"
	"testing"
)

// refusedAddr returns a loopback address that refused connections a moment ago.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
