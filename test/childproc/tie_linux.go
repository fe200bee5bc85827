package childproc

import (
	"os/exec"
	"syscall"
)

// tie asks the kernel to kill the child when its parent goes. The signal
// follows the thread that started the child, and Go keeps threads alive
// for the life of the process, so in practice it follows the process.
func tie(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr.Setpgid = true }
