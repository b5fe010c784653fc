// Package agent is the guest side of the control channel: Serve answers a
// host's proto.Client over any byte stream, running the commands it asks
// for and reporting what they did.
//
// A session (proto.Exec) runs with pipes — stdin, stdout and stderr kept
// separate, in its own process group — or with a pseudo-terminal allocated
// through /dev/ptmx (TIOCSPTLCK, TIOCGPTPEER), where the child leads a new
// session whose controlling terminal is the pty, so ^C written by the host
// interrupts the foreground job and Resize (TIOCSWINSZ) sends it SIGWINCH.
// Signals go to the process group (and, on a pty, the foreground group).
// Output is sent only as the host grants credit, so a command producing
// faster than the host reads blocks in write(2); memory stays bounded. After
// the command exits, output is drained until the streams close or stay idle
// for Config.DrainTimeout (a background job holding them open). The session
// ends with ExecEvent, then Exit{Code, Signal} — after every Stdout/Stderr
// and every FileEvent caused before the exit (the Watcher is flushed).
//
// Watcher (inotify) reports the workspace's changes recursively: new
// directories are watched and scanned as they appear, renames are paired,
// bursts of writes coalesce into one event.
//
// Snapshots (freeze_linux.go): Freeze flushes and stops the watcher (its
// descriptors pin every workspace directory), syncs and unmounts the
// workspace (Config.Workspace; QEMU will not migrate a guest with a 9p
// export mounted), then answers Frozen and holds every later frame on the
// connection (proto.Conn.Hold) until Thaw: nothing is half-written when
// the guest is saved. A busy workspace refuses the freeze, naming the
// processes that hold it (Holders, a walk of /proc). While frozen, Exec is
// refused. Thaw reseeds the kernel's generator from the host's seed
// (AddEntropy) and sets the clock, both of which a restored guest has
// stale; mounts the workspace (also the first time, when boot deferred
// it) and watches it again; then writes Thawed and what it held. A
// restored Thaw is a new host's: the old host's sessions are killed and
// nothing of theirs is sent, not even what was held.
//
// What this package must never do:
//
//   - leak the agent's own environment into a command. A command's
//     environment is built only from the guest's base (Config.Env: PATH,
//     HOME, SHELL and the CA variables) and the host's Exec.Env — nothing
//     from os.Environ, and the executable is looked up in the command's PATH.
//   - buffer without bound on behalf of either side, or let one slow
//     session stall another.
//   - leave a command running after its connection is gone: Serve kills
//     every session's process group before it returns; a restored Thaw
//     kills the sessions of the host before the snapshot.
//   - send a frame between Frozen and Thaw, or send a new host anything of
//     a session of the host before it (their ids may be reused).
//   - reap processes it did not start: as PID 1, capsem-agent runs Serve in
//     a child process and reaps orphans there, so exec.Cmd.Wait here keeps
//     its exit statuses.
package agent
