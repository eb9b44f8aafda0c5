//go:build unix

package ollamatest

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd lead a new process group, so that killGroup also reaches the model
// runners `ollama serve` starts (a killed server leaves them running otherwise).
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
