package proto

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrBusy wraps Freeze's error when the agent refused to freeze: the
// workspace is in use (a process has its directory or a file under it
// open, so it cannot be unmounted) or could not be unmounted. The message
// carries the agent's reason and the processes holding the workspace; the
// guest runs on unfrozen.
var ErrBusy = errors.New("proto: the guest cannot be snapshotted now")

// ErrNoFreeze is returned by Freeze, before anything is sent, when the
// agent's Hello does not list FeatureFreeze: it would ignore the request
// and the caller would wait for ever.
var ErrNoFreeze = errors.New("proto: the guest agent is older than snapshots (its hello lists no \"freeze\"): rebuild the guest image with this capsem (capsem image build --force)")

// ErrFreezing is returned by Freeze when the client is frozen already, or
// another Freeze waits for its answer: Thaw first.
var ErrFreezing = errors.New("proto: the agent is frozen, or being frozen, already; Thaw it first")

// errRestored ends the sessions of a client whose guest was restored from
// a snapshot (Thaw.Restored): the agent killed their commands.
var errRestored = errors.New("proto: the guest was restored from a snapshot, which ended this command")

// maxHoldersShown bounds the holders an ErrBusy message names: a guest
// may list as many as a frame holds.
const maxHoldersShown = 16

// Freeze asks the agent to quiesce for a snapshot and waits for its
// answer. From the moment Freeze is written the client holds every frame
// it would send (Window credit, Stdin, Signal, Ping, Exec, Pong, …) until
// Thaw, so that no byte of the host's reaches the guest between Frozen and
// Thaw: a snapshot must not hold half a frame, or a frame meant for the
// host it was frozen for. A Ping or Exec meanwhile waits (for its ctx).
//
// When the agent refuses (its workspace is in use), the held frames are
// sent, the guest runs on, and the error wraps ErrBusy, naming the
// reason and the holders; the Frozen is returned too. When ctx ends
// first, the agent may be frozen or not: call Thaw, which any agent in
// any state answers, before going on. An agent that does not list
// FeatureFreeze is not asked: the error is ErrNoFreeze.
func (c *Client) Freeze(ctx context.Context, reason string) (Frozen, error) {
	if !c.Hello().Has(FeatureFreeze) {
		return Frozen{}, ErrNoFreeze
	}
	ch := make(chan Frozen, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return Frozen{}, c.err
	}
	if c.freezeWait != nil || c.conn.Holding() {
		c.mu.Unlock()
		return Frozen{}, ErrFreezing
	}
	c.freezeWait = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.freezeWait == ch {
			c.freezeWait = nil
		}
		c.mu.Unlock()
	}
	if err := c.conn.Hold(ctx, Freeze{Reason: reason}); err != nil {
		forget()
		return Frozen{}, err
	}
	select {
	case fr := <-ch:
		if fr.Refused == "" {
			return fr, nil
		}
		// Not frozen: what was held goes now, in order.
		if err := c.conn.Release(context.Background(), nil); err != nil {
			return fr, err
		}
		return fr, busyError(fr)
	case <-c.done:
		return Frozen{}, c.Err()
	case <-ctx.Done():
		forget()
		return Frozen{}, fmt.Errorf("proto: freeze: no answer from the agent: %w; it may be frozen: Thaw it before going on", context.Cause(ctx))
	}
}

func busyError(fr Frozen) error {
	holders := fr.Holders
	more := 0
	if len(holders) > maxHoldersShown {
		holders, more = holders[:maxHoldersShown], len(holders)-maxHoldersShown
	}
	shown := make([]string, len(holders))
	for i, h := range holders {
		shown[i] = logText(h)
	}
	msg := logText(fr.Refused)
	if len(shown) > 0 {
		msg += " (held by " + strings.Join(shown, ", ")
		if more > 0 {
			msg += fmt.Sprintf(" and %d more", more)
		}
		msg += ")"
	}
	return fmt.Errorf("%w: %s", ErrBusy, msg)
}

// Thaw resumes the agent and waits for its answer; then the frames held
// since Freeze are sent, in order, after the Thaw. It may be called in any
// state: an agent that is not frozen only sets its clock and reseeds.
//
// t.Time zero is the host's clock now; t.Seed empty is 64 bytes from
// crypto/rand. With t.Restored the agent kills the commands it ran before
// (a restored guest's are another host's): this client's sessions end with
// an error and the frames held for them are dropped. A client over a new
// stream to a restored guest is made by Resume instead.
func (c *Client) Thaw(ctx context.Context, t Thaw) (Thawed, error) {
	if err := fillThaw(&t); err != nil {
		return Thawed{}, err
	}
	ch := make(chan Thawed, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return Thawed{}, c.err
	}
	if c.thawWait != nil {
		c.mu.Unlock()
		return Thawed{}, errors.New("proto: another Thaw waits for the agent's answer; wait for it")
	}
	c.thawWait = ch
	c.freezeWait = nil // a Freeze that gave up: its late Frozen is ignored
	var ended []*Session
	if t.Restored {
		for _, s := range c.sessions {
			ended = append(ended, s)
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.thawWait == ch {
			c.thawWait = nil
		}
		c.mu.Unlock()
	}()
	if t.Restored {
		for _, s := range ended {
			c.finish(s, Exit{}, errRestored)
		}
		c.conn.Drop()
	}
	if err := c.conn.Release(ctx, t); err != nil {
		return Thawed{}, err
	}
	select {
	case th := <-ch:
		return th, nil
	case <-c.done:
		return Thawed{}, c.Err()
	case <-ctx.Done():
		return Thawed{}, fmt.Errorf("proto: thaw: no answer from the agent: %w", context.Cause(ctx))
	}
}

// fillThaw gives t its defaults and checks its seed.
func fillThaw(t *Thaw) error {
	if t.Time == 0 {
		t.Time = time.Now().UnixNano()
	}
	if len(t.Seed) == 0 {
		t.Seed = make([]byte, 64)
		if _, err := rand.Read(t.Seed); err != nil {
			return fmt.Errorf("proto: thaw: a seed for the guest: %w", err)
		}
	}
	if len(t.Seed) < MinSeed || len(t.Seed) > MaxSeed {
		return fmt.Errorf("proto: thaw: a seed of %d bytes; give %d to %d, or none for one from crypto/rand", len(t.Seed), MinSeed, MaxSeed)
	}
	return nil
}

// answerFreeze hands the agent's Frozen to the Freeze waiting for it.
func (c *Client) answerFreeze(m Frozen) {
	c.mu.Lock()
	ch := c.freezeWait
	c.freezeWait = nil
	c.mu.Unlock()
	if ch == nil {
		c.replies.warn(c.log, "frozen from the agent that no Freeze waits for, ignored")
		return
	}
	ch <- m
}

// answerThaw hands the agent's Thawed to the Thaw waiting for it.
func (c *Client) answerThaw(m Thawed) {
	c.mu.Lock()
	ch := c.thawWait
	c.thawWait = nil
	c.mu.Unlock()
	if ch == nil {
		c.replies.warn(c.log, "thawed from the agent that no Thaw waits for, ignored")
		return
	}
	ch <- m
}

// Resume is a Client over a new stream rw to an agent restored from a
// snapshot, which did its handshake with another host before it was
// frozen: there is no Hello exchange. It sends thaw (Restored set: the
// agent drops the sessions of the host it was frozen for, and everything
// it held for it), waits for Thawed, then reads on as NewClient's client.
// agent and ready are what that handshake gave (Client.Hello and
// Client.Ready of the host that froze it), returned by Hello and Ready.
// ctx bounds the wait for Thawed only: when it is done first, rw is
// closed. Failures wrap ErrHandshake.
func Resume(ctx context.Context, rw io.ReadWriteCloser, opts ClientOptions, agent Hello, ready Ready, thaw Thaw) (*Client, Thawed, error) {
	thaw.Restored = true
	// The saved Hello is read from a file: it is checked as a live one is.
	if err := checkHello(agent, "agent"); err != nil {
		rw.Close()
		return nil, Thawed{}, fmt.Errorf("the saved hello: %w", err)
	}
	if err := fillThaw(&thaw); err != nil {
		rw.Close()
		return nil, Thawed{}, err
	}
	c := newClient(rw, opts)
	c.agent, c.ready = agent, ready
	var th Thawed
	err := c.start(ctx, rw, func() error {
		var err error
		th, err = c.resume(thaw)
		return err
	})
	if err != nil {
		return nil, Thawed{}, err
	}
	return c, th, nil
}

// resume sends thaw and reads up to the agent's Thawed. What a restored
// agent owed its old host was dropped, so Thawed comes first; session
// frames before it are ignored as the read loop would.
func (c *Client) resume(thaw Thaw) (Thawed, error) {
	if err := c.conn.Send(thaw); err != nil {
		return Thawed{}, fmt.Errorf("%w: resuming: %w", ErrHandshake, err)
	}
	for {
		m, err := c.conn.Recv()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Thawed{}, fmt.Errorf("%w: resuming, waiting for thawed: %w", ErrHandshake, err)
		}
		switch m := m.(type) {
		case Thawed:
			return m, nil
		case Error:
			if m.ID == 0 {
				return Thawed{}, fmt.Errorf("%w: resuming: the agent failed: %s", ErrHandshake, logText(m.Msg))
			}
			c.strayFrame(m, m.ID)
		case Stdout:
			c.strayFrame(m, m.ID)
		case Stderr:
			c.strayFrame(m, m.ID)
		case Window:
			c.strayFrame(m, m.ID)
		case Started:
			c.strayFrame(m, m.ID)
		case Exit:
			c.strayFrame(m, m.ID)
		case FileEvent, ExecEvent, Unknown:
			c.event(m)
		case Ping, Pong, Frozen:
			// Nothing waits for them yet; a Ping is not owed a Pong
			// before the client runs.
		default:
			return Thawed{}, fmt.Errorf("%w: resuming: the agent sent %v, which only the host sends", ErrHandshake, m.Type())
		}
	}
}
