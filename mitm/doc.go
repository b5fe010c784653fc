// Package mitm will hold capsem's TLS interception: the per-installation CA,
// leaf certificates, TLS termination, HTTP/1.1 and HTTP/2 proxying with
// request-level policy, and parsing of AI-provider traffic into model and
// tool calls. It implements netstack.FlowHandler; netstack never imports it.
//
// It is empty until the TLS-interception issue lands: today allowed flows
// are spliced byte for byte by netstack.Splice. It must never forward a
// request it has not decided on, and never store a secret header in clear.
package mitm
