// Package loopback answers one question for the sandbox, the config and
// the metrics listener: does a host name, listen address or URL reach
// only this machine? A name other than localhost may resolve anywhere and
// an empty host binds every interface, so both count as public.
package loopback

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Host reports whether host (no port; IPv6 without brackets) is
// localhost or a loopback address (127.0.0.0/8, ::1, or either mapped).
func Host(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Addr reports whether a listen address (host:port, or a bare host)
// binds only loopback.
func Addr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return Host(host)
}

// URL reports whether a URL names a loopback host; one that does not
// parse, or has no host, counts as public.
func URL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Host != "" && Host(u.Hostname())
}
