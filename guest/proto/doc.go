// Package proto is the control-channel protocol between capsem on the host
// and capsem-agent in the guest, and the host's client for it.
//
// The channel is any byte stream: a virtio-serial port carried over a
// socketpair under QEMU, a vsock connection under Apple's Virtualization
// framework, net.Pipe in tests. It has no message boundaries, so messages
// travel in frames (all integers big-endian):
//
//	length  uint32   bytes after this field: 5 + len(body), at most MaxFrame (1 MiB)
//	type    uint8    Type: hello, ready, exec, stdin, stdout, exit, …
//	id      uint32   session id; 0 for messages of no session
//	body             Stdin/Stdout/Stderr: the raw bytes (≤ 32 KiB sent per frame)
//	                 Window: stream uint8, credit uint32
//	                 StdinClose: empty
//	                 everything else: a JSON object (unknown fields ignored)
//
// Conversation: the agent sends Hello (protocol version, agent version,
// kernel release, its stdin window, the optional requests it answers:
// Features), the host answers with its Hello
// (version, wall clock, optionally the CA to trust), the agent sends Ready
// (boot facts). Then the host runs sessions — Exec{ID, Argv, Env, Dir, TTY,
// Rows, Cols, Window} → Started{PID}, Stdin/StdinClose/Signal/Resize in,
// Stdout/Stderr out, and at the end ExecEvent then Exit{Code, Signal}, or
// Error{ID} if the command could not run — many at once, and the agent sends
// FileEvents for the workspace. Shutdown powers the guest off. Signals go by
// name ("INT"), not number: macOS and Linux number them differently.
//
// Snapshots: Freeze asks the agent to quiesce so that QEMU can save the
// guest. The agent flushes and stops its file watcher, syncs and unmounts
// the workspace (QEMU refuses to migrate with a 9p export mounted), then
// answers Frozen, the last frame it writes before Thaw; or it refuses
// (Frozen.Refused, Frozen.Holders: who keeps the workspace busy) and runs
// on. From Freeze to Thaw both sides hold every frame they would send
// (Conn.Hold, Release): no byte crosses the channel while the guest may be
// saved, so a snapshot never holds half a frame. Thaw{Time, Seed,
// Restored} sets the guest's clock, reseeds its random generator (a
// restored or forked guest's is a copy), mounts the workspace and restarts
// the watcher; Restored says the stream is a new host's: the agent kills
// the old host's sessions and drops what it held for it, since their ids
// mean nothing to the new host, which may reuse them. Resume is the host's
// client over such a stream: no Hello, a Thaw first. The agent answers
// Thawed in any state, so that a host can always Thaw. An agent older than
// these types ignores them (Unknown) and never answers: its Hello lists no
// FeatureFreeze, and the client refuses to send it a Freeze (ErrNoFreeze).
//
// Flow control is per session and stream: the receiver names a window
// (Hello.Window for stdin, Exec.Window for stdout and stderr), the sender
// spends Credit and the receiver's Inbox returns it with Window messages as
// its consumer reads. A fast command therefore blocks in write(2) inside the
// guest instead of filling the host's memory, and one slow session never
// stalls another or the control messages.
//
// What this package must never do: trust the peer, or let it grow the host.
// The guest is the sandbox; every frame it sends is bounded by MaxFrame
// before allocation, decoding never panics (FuzzFrame), data beyond a window
// ends the connection (ErrWindowExceeded) instead of being buffered, and
// every message kind has a bounded host cost (limits.go; FuzzClient plays a
// hostile agent): one pending Pong however many Pings arrive, rate-limited
// logs, sessions only the host opens, frames of sessions the client does
// not have dropped. A peer that breaks the protocol is cut
// off (ErrViolation) for the caller to stop the VM; so is one that stops
// reading: every host write has a deadline (ClientOptions.WriteTimeout,
// ErrStalled), and a wait for another Send's write ends with its context
// (Ping, Exec), so that no signal, probe or stop waits on the guest. What the guest reports
// about itself (ExecEvent, FileEvent) is handed on as a claim, never as the
// host's record: Session.Exec and Session.Times are what the host sent and
// saw. It also never does I/O of its own beyond the stream it is given.
package proto
