package proto

import (
	"context"
	"errors"
	"io"
)

// Holding the sends of a Conn, for a snapshot (Freeze … Thaw).
//
// Why a hold and not a pause of the senders: a snapshot saves the guest
// with whatever sits in the channel's buffers, and a restored guest's
// channel is a new host's stream. Between Frozen and Thaw neither side may
// write a byte, or the snapshot would hold half a frame, or a frame meant
// for a host that is gone. Blocking the senders instead would block the
// agent's reading loop on its own answers (an Error to a refused Exec) and
// could not discard what a restored guest owes its old host. So Send,
// while holding, encodes its frame whole into a queue and returns: every
// frame is kept whole and in the order of the Sends, and Release writes
// them, or Drop discards them. What the queue can grow to is bounded by
// what is sent under credit (each session's windows) and by the peer's own
// frames (one answer each): nothing is read from a command beyond its
// output credit.

// Hold writes m (unless nil), then holds every later Send until Release:
// Send queues its frame and returns nil. Holding already, it writes m
// ahead of what is held. The write of m and the start of the hold are one
// step: no other Send's frame is written after m.
func (c *Conn) Hold(ctx context.Context, m Message) error {
	f, b, err := encodeFrame(m)
	if err != nil {
		return err
	}
	if err := c.lock(ctx, f.Type); err != nil {
		return err
	}
	defer c.unlock()
	if c.werr != nil {
		return c.werr
	}
	if b != nil {
		if err := c.writeLocked(b, f.Type); err != nil {
			return err
		}
	}
	c.holding.Store(true)
	return nil
}

// Release writes m (unless nil), then the held frames in the order they
// were sent, and ends the hold; later Sends write again. Not holding, it
// writes m only. When a write fails the frames not written are dropped:
// the stream is broken (as Send's error says).
func (c *Conn) Release(ctx context.Context, m Message) error {
	f, b, err := encodeFrame(m)
	if err != nil {
		return err
	}
	if err := c.lock(ctx, f.Type); err != nil {
		return err
	}
	defer c.unlock()
	held := c.held
	c.held = nil
	c.holding.Store(false)
	if c.werr != nil {
		return c.werr
	}
	if b != nil {
		if err := c.writeLocked(b, f.Type); err != nil {
			return err
		}
	}
	for _, h := range held {
		if err := c.writeLocked(h, Type(h[4])); err != nil {
			return err
		}
	}
	return nil
}

// Drop discards the held frames, keeping the hold, and says how many it
// discarded: what a guest restored from a snapshot owed the host it was
// frozen for, which a new host must not get.
func (c *Conn) Drop() int {
	c.wsem <- struct{}{}
	defer c.unlock()
	n := len(c.held)
	c.held = nil
	return n
}

// Rebind moves the Conn onto a new stream rw: for a transport whose
// connection does not survive a snapshot (vsock under Apple's
// Virtualization framework, where a restored guest's host connects anew),
// the agent goes on with the new host's connection. Only while holding,
// so no frame of the old stream is half-written; what is held stays held
// for Release or Drop. The old stream's write error is forgotten and its
// reader replaced, with whatever it had buffered: call Rebind from the
// goroutine that calls Recv. The old stream is the caller's to close.
func (c *Conn) Rebind(rw io.ReadWriter) error {
	c.wsem <- struct{}{}
	defer c.unlock()
	if !c.holding.Load() {
		return errors.New("proto: rebind of a connection that is not holding its sends: a frame could be half-written")
	}
	c.rw, c.r, c.werr = rw, NewReader(rw), nil
	return nil
}

// Holding reports whether Sends are held (between Hold and Release).
func (c *Conn) Holding() bool { return c.holding.Load() }

// encodeFrame encodes m for Hold and Release; nil gives no bytes.
func encodeFrame(m Message) (Frame, []byte, error) {
	if m == nil {
		return Frame{}, nil, nil
	}
	f, err := Encode(m)
	if err != nil {
		return f, nil, err
	}
	b, err := AppendFrame(nil, f)
	return f, b, err
}
