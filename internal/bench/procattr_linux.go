package bench

import "syscall"

// childAttr is the process attributes of a child the harness starts: its
// own process group, and SIGKILL when the harness dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
