// Package storeflags is the event store's command-line flags, its audit
// stream's (--audit-otlp) with them, shared by capsem (run, start, and the
// supervisor start spawns: Pass) and capsem-net so that they name, default
// and read them alike. It must never hold anything but the flags and their
// reading: what they mean is package store's.
package storeflags
