package dns

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// recheckConf is how often, at most, resolv.conf is checked for a change:
// a stat per second, whatever the number of queries.
const recheckConf = time.Second

// systemConf is the resolver configuration from resolv.conf, re-read when
// the file changes (a DHCP renewal, a VPN, a container runtime rewriting
// it), so that the source follows the system's servers without a restart.
// A file that becomes unreadable or lists no usable server keeps the last
// good configuration, logged once.
type systemConf struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamp   [2]int64 // size and modification time of the file read
	servers []string
	names   func(string) []string
	failed  string
}

// loadSystem reads path; it fails when the file is unreadable or names no
// usable server.
func loadSystem(path string, log *slog.Logger) (*systemConf, error) {
	c := &systemConf{path: path, log: log, now: time.Now}
	if err := c.read(); err != nil {
		return nil, err
	}
	c.checked = c.now()
	return c, nil
}

func (c *systemConf) read() error {
	fi, err := os.Stat(c.path)
	if err != nil {
		return fmt.Errorf("reading the system resolver configuration: %w", err)
	}
	cc, err := mdns.ClientConfigFromFile(c.path)
	if err != nil {
		return fmt.Errorf("reading the system resolver configuration: %w", err)
	}
	var servers []string
	for _, srv := range cc.Servers {
		if hp, err := hostPort(net.JoinHostPort(srv, cc.Port)); err == nil {
			servers = append(servers, hp)
		}
	}
	if len(servers) == 0 {
		return fmt.Errorf("reading the system resolver configuration: no usable nameserver in %s", c.path)
	}
	c.servers, c.names = servers, cc.NameList
	c.stamp = [2]int64{fi.Size(), fi.ModTime().UnixNano()}
	return nil
}

// get returns the current servers and search-list expansion.
func (c *systemConf) get() ([]string, func(string) []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); now.Sub(c.checked) >= recheckConf {
		c.checked = now
		c.refresh()
	}
	return c.servers, c.names
}

// refresh re-reads the file when its size or modification time changed.
func (c *systemConf) refresh() {
	fi, err := os.Stat(c.path)
	if err == nil && [2]int64{fi.Size(), fi.ModTime().UnixNano()} == c.stamp {
		return
	}
	if err == nil {
		err = c.read()
	}
	if err != nil {
		if msg := err.Error(); msg != c.failed {
			c.log.Warn("cannot re-read the system resolver configuration; keeping the last one", "err", err)
			c.failed = msg
		}
		return
	}
	c.failed = ""
	c.log.Info("system resolver configuration changed", "file", c.path, "servers", c.servers)
}

// current returns the servers to ask and the search-list expansion (nil:
// names as they are).
func (r *resolver) current() ([]string, func(string) []string) {
	if r.system != nil {
		return r.system.get()
	}
	return r.servers, r.names
}
