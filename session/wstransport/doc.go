// Package wstransport implements session.Transport over a github.com/coder/websocket
// connection, so that the connection core (package session) does not depend on a WebSocket
// library.
//
// The library's read limit is disabled and frames are read through an io.LimitReader, so that
// an oversize frame can be answered with websocket_message_too_large before the close with 1009.
// [NewBudget] also counts each frame in the server-wide session.Budget while
// it is read and decoded (a frame that does not fit is discarded and Read returns
// session.ErrOverloaded; the connection stays usable), and drops a read buffer larger than
// 64 KiB when the next read begins, so that an idle connection keeps no large buffer.
// Close sends the protocol.CloseCode it is given as the WebSocket close code.
package wstransport
