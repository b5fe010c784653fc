// Package inspect is the contract between the MITM's request path and the
// inspectors that read what passes through it: what an inspector sees of
// one exchange (a request and its response), and the hooks it implements.
//
// An Inspector is asked once per exchange, in the order of the core's one
// list (mitm/inspectors.go), whether the exchange interests it: Begin
// returns a Stream, or nil when it does not (then it costs nothing more).
// The streams are then driven in that order through the request (Tap,
// Request), in the reverse order through the response (Response: the stage
// nearest the upstream sees it first, as in Envoy's filter chain), and in
// list order once more when the exchange is done (Done). The secrets and
// DLP guard is the core's built-in last stage and goes through the same
// hooks.
//
// A stream refuses by answering the guest through its Exchange (Refuse,
// Answer), or, while the body streams, by marking the refusal
// (MarkRefused: the first one marked wins, and the request is cancelled
// upstream). A refusal by one stream ends the request path: the streams
// after it never see the body, nor the upstream the request. The core
// alone writes the exchange's net event from what the streams said: an
// inspector never sets a decision itself.
//
// What this package must never do: import the MITM core (package mitm) or
// an inspector; hold state of its own. Inspectors import it, never the
// core; the core imports inspectors in its list file only.
package inspect
