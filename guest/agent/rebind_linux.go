package agent

import (
	"context"
	"fmt"
	"io"
)

// A new host's connection to a frozen guest (Config.Conns).
//
// Under Apple's Virtualization framework the control channel is a vsock
// connection the host makes; a save and restore does not carry it (the
// restored VM is a new one on the host's side, and the guest's transport
// is reset), so the host of a restored guest connects again. The agent
// listens for as long as it serves, and a connection that arrives while
// it is frozen is the new host's: the loop moves the proto.Conn onto it,
// still holding what the old host was owed, and the new host's Thaw
// (Restored) drops that and goes on. A guest that was saved and let go on
// keeps its connection, and the same host thaws it there.
//
// While not frozen a second connection is closed at once: the guest has a
// host, and a process on the host side that dials the port must not take
// the channel over from it.

// setFrozen sets frozen, which the loop owns, and its mirror for
// takeConns.
func (s *server) setFrozen(f bool) {
	s.frozen = f
	s.isFrozen.Store(f)
}

// takeConns takes the host's later connections until ctx is done or
// Config.Conns is closed. One that arrives while frozen goes to the loop
// (replacing one the loop has not taken yet), and the current stream is
// closed, which ends the loop's Recv on it.
func (s *server) takeConns(ctx context.Context) {
	for {
		var rw io.ReadWriteCloser
		var ok bool
		select {
		case rw, ok = <-s.cfg.Conns:
			if !ok {
				return
			}
		case <-ctx.Done():
			return
		}
		if !s.isFrozen.Load() {
			s.log.Warn("a second host connection while the first serves, closed: only a restored guest's new host connects again")
			rw.Close()
			continue
		}
		select {
		case old := <-s.next:
			old.Close()
		default:
		}
		s.next <- rw
		s.log.Info("a new host connected to the frozen guest")
		s.closeStream()
	}
}

// rebind waits for the connection takeConns hands over after the stream
// ended with cause while frozen, and moves the Conn onto it.
func (s *server) rebind(ctx context.Context, cause error) error {
	s.log.Info("the host's connection ended while frozen; waiting for the next one", "err", cause)
	var rw io.ReadWriteCloser
	select {
	case rw = <-s.next:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if err := s.conn.Rebind(rw); err != nil {
		rw.Close()
		return fmt.Errorf("agent: %w", err)
	}
	s.rwMu.Lock()
	old := s.rw
	s.rw = rw
	s.rwMu.Unlock()
	old.Close()
	return nil
}

// closeStream closes the current stream.
func (s *server) closeStream() {
	s.rwMu.Lock()
	rw := s.rw
	s.rwMu.Unlock()
	rw.Close()
}
