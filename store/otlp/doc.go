// Package otlp streams a session's events to a security team's
// OpenTelemetry collector as OTLP/HTTP log records (capsem --audit-otlp),
// through the official OpenTelemetry Go SDK's exporter.
//
// The queue is the store. A Shipper reads the session's synced events
// after the last one the collector acknowledged, sends them in batches,
// and moves on only when the collector answers 2xx; a collector that is
// down, refuses or times out is retried (backoff up to maxBackoff) with
// the same batch, for as long as it takes. So every event arrives, in
// order, once per acknowledgement — nothing is lost while the collector
// is away, for minutes or hours, because nothing leaves the store — and
// the queue is as bounded as the store is (--max-session-bytes). What is
// bounded here is how far behind the stream may fall (Config.Backlog
// events): past it the Shipper records a recording event (audit-behind)
// and calls Config.Behind, which a caller that must not run unaudited
// (--audit-required) turns into refusing new flows, as for a full store.
//
// What this package must never do: drop or reorder an event, send one
// before it is durable in the store, or hold more than one batch in
// memory.
package otlp
