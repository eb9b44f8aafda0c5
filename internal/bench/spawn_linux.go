package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the child get SIGTERM if the bench dies without stopping it (a SIGPIPE
// on stdout, a kill).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
