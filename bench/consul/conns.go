package consul

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// connSampler samples, every 50 ms, the TCP connections that one process
// holds to a set of local ports (the agent's HTTP and HTTPS ports).
//
// It counts only ESTABLISHED sockets whose inode is among the process's
// file descriptors and whose remote port is one of the ports, each inode
// once. The kernel lists /proc/net/tcp a page per read, and a socket
// opened or closed between two reads can move and show twice; counting
// distinct inodes keeps such a listing from inflating a peak. At each new
// peak the sampler keeps the listing of every socket the process has to
// those ports, in any state, so that a surprising peak can be explained.
type connSampler struct {
	pid   int
	ports []string // ":%04X" suffixes of /proc/net/tcp addresses

	mu       sync.Mutex
	peak     int // since the last takePeak
	max      int // of the whole run
	atMax    string
	maxWhen  time.Time
	samples  int
	lastSeen int
}

func newConnSampler(pid int, ports ...int) *connSampler {
	s := &connSampler{pid: pid}
	for _, p := range ports {
		if p == 0 {
			continue
		}
		s.ports = append(s.ports, fmt.Sprintf(":%04X", p))
	}
	return s
}

// run samples until ctx ends.
func (s *connSampler) run(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.record(s.sample())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record adds a sample of n connections, listed.
func (s *connSampler) record(n int, listing string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	s.lastSeen = n
	s.peak = max(s.peak, n)
	if n > s.max {
		s.max, s.atMax, s.maxWhen = n, listing, time.Now()
	}
}

// takePeak returns the peak since the previous call, the connections held
// now included, and starts a new one from them. Sampling now as well means
// a phase shorter than run's interval (or than one sample, which on a busy
// machine can take longer) still has a figure: the connections it ends
// with.
func (s *connSampler) takePeak() int {
	s.record(s.sample())
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peak
	s.peak = s.lastSeen
	return p
}

// report describes the run's peak with the sockets held at that moment.
func (s *connSampler) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d samples; peak %d ESTABLISHED at %s; sockets of the process to the agent then (local remote state inode):\n%s",
		s.samples, s.max, s.maxWhen.UTC().Format(time.RFC3339Nano), s.atMax)
}

// tcpStates names the states of /proc/net/tcp.
var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}

// sample counts the process's established connections to the ports and
// lists all its sockets to them.
func (s *connSampler) sample() (int, string) {
	inodes := socketInodes(s.pid)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil || len(inodes) == 0 {
		return 0, ""
	}
	established := map[string]bool{}
	var listing []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] || !slices.ContainsFunc(s.ports, func(p string) bool { return strings.HasSuffix(f[2], p) }) {
			continue
		}
		if f[3] == "01" {
			if established[f[9]] {
				continue
			}
			established[f[9]] = true
		}
		state := tcpStates[f[3]]
		if state == "" {
			state = f[3]
		}
		listing = append(listing, fmt.Sprintf("%s %s %s %s", hexPort(f[1]), hexPort(f[2]), state, f[9]))
	}
	slices.Sort(listing)
	return len(established), strings.Join(listing, "\n")
}

// socketInodes returns the inodes of the sockets among the process's
// file descriptors.
func socketInodes(pid int) map[string]bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(dir + "/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			out[l[len("socket:["):len(l)-1]] = true
		}
	}
	return out
}

// hexPort turns "0100007F:1F90" into "127.0.0.1:8080".
func hexPort(addr string) string {
	h, p, ok := strings.Cut(addr, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || len(h) != 8 {
		return addr
	}
	ip, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return addr
	}
	// The address is in the kernel's (little-endian) byte order.
	return fmt.Sprintf("%d.%d.%d.%d:%d", ip&255, ip>>8&255, ip>>16&255, ip>>24, port)
}
