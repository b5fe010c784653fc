// Package storeflags is the event store's command-line flags, shared by
// capsem (run, start) and capsem-net so that the two name, default and
// read them alike. It must never hold anything but the flags and their
// reading: what they mean is package store's.
package storeflags
