// Package modelcall is the inspector of AI-provider API calls: it knows a
// call by its host, method and path (package provider), parses the request
// and the response as they pass (model, tokens, tool calls and their
// results), and records one model_call event per allowed call, after the
// exchange's net event.
//
// What it must never do: change a byte of what passes, hold a body, refuse
// a request, or import the MITM core (it sees an exchange through package
// inspect only).
package modelcall
