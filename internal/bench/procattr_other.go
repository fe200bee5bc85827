//go:build !linux

package bench

import "syscall"

// childAttr is the process attributes of a child the harness starts; off
// Linux, the defaults (a ctrl-C at the terminal reaches the children too).
func childAttr() *syscall.SysProcAttr { return nil }
