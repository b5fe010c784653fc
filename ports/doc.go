// Package ports publishes a guest's TCP ports on the host: a listener on
// a host address for each published port, whose connections the sandbox's
// netstack carries into the guest (netstack.Stack.Inbound) and records as
// inbound flows.
//
// A publish spec is [HOSTIP:]HOSTPORT:GUESTPORT[/tcp] (spec.go): HOSTIP
// is 127.0.0.1 unless given, so a port is reachable from this host only
// unless the user names another address; HOSTPORT 0 takes a free port.
// The sandbox's settings keep the specs as written, so a port survives a
// stop and a start (a 0 takes a free port again).
//
// What this package must never do: listen on an address the user did not
// name (never 0.0.0.0 by default), open anything in the guest but the
// published port, or take a connection the netstack cannot record (the
// netstack refuses it, fail closed). A guest cannot publish a port: only
// the host side calls Add.
package ports
