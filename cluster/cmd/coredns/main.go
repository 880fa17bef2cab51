// Command coredns is CoreDNS with only the plugins the one-machine cluster uses:
// kubernetes (answers cluster.local and the pod range's reverse zone from the
// API server), cache, errors, log, health, ready, and bind (listen on the
// addresses named in the Corefile only). There is no forward plugin, so a
// lookup never leaves the machine; a Corefile naming any other plugin is
// refused at start ("unknown directive").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	// The order a request passes through the plugins: upstream's order
	// (core/dnsserver/zdirectives.go), restricted to the plugins linked in.
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}
	coremain.Run()
}
