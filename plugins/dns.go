//go:build !no_dns

package plugins

// The DNS source: SRV (and A/AAAA) records polled with TTL-aware refresh.
import _ "github.com/xdsbridge/xdsbridge/sources/dns"
