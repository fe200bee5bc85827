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

// TieInOwnGroup is Tie, and puts the child in a process group of its own:
// a ctrl-C at the terminal reaches only the parent, which then stops its
// children in order (a harness that must stop its bridge before its
// agents). Off Linux it does nothing.
func TieInOwnGroup(cmd *exec.Cmd) { tie(cmd); ownGroup(cmd) }
