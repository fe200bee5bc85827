// Package childproc ties the servers tests and benchmarks start (Consul
// agents, CoreDNS, bridges) to the process that started them, so that a
// test binary killed outright (SIGKILL, the OOM killer, a CI timeout)
// leaves none of them running: cleanups run only when it exits by itself.
package childproc

import "os/exec"

// Tie makes cmd's process die when the process that started it does, where
// the system allows (Linux); elsewhere it does nothing. Call it before
// cmd.Start.
func Tie(cmd *exec.Cmd) { tie(cmd) }
