// Package mitm is capsem's TLS interception. It is a netstack.FlowHandler:
// netstack hands it every allowed TCP flow, and for flows to port 443 it
//
//   - reads the guest's ClientHello (package tlshello) and refuses the flow
//     when there is no SNI or the SNI is not the name the guest resolved;
//   - splices names listed in the policy's [tls] passthrough without
//     interception, after replaying the ClientHello upstream;
//   - otherwise terminates the guest's TLS (1.2/1.3, ALPN h2 and http/1.1)
//     with a leaf minted by the installation's CA (package ca), serves
//     HTTP/1.1 or HTTP/2 to the guest, decides every request against the
//     policy in force at that moment (Host must match the SNI; [[http]]
//     rules), and forwards allowed requests upstream over verified TLS with
//     connection reuse, streaming bodies both ways without holding them;
//   - records every request as a net event (headers with secret values
//     hashed, body previews) and every AI-provider API call as a model_call
//     event with its tool calls and tool results (package provider).
//
// Other ports are spliced byte for byte by netstack.Splice. The proxy never
// forwards a request it has not decided on and never stores a secret header
// value in clear.
package mitm
