//go:build !unix

package ollamatest

import "os/exec"

// ownGroup does nothing here: killGroup kills only the server.
func ownGroup(*exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
