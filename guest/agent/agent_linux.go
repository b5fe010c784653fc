package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// ErrShutdown is returned by Serve when the host sent Shutdown.
var ErrShutdown = errors.New("agent: the host asked for shutdown")

// Config configures Serve. The zero value works: no file events, commands
// in /, the defaults below.
type Config struct {
	// Version is the agent's version, sent in Hello.
	Version string
	// Kernel is the kernel release sent in Hello (default: uname -r).
	Kernel string
	// Env is the guest's base environment for every command (default:
	// DefaultEnv(Shell)). The host's Exec.Env is laid over it.
	Env []string
	// Dir is the working directory of a command that names none (default /).
	Dir string
	// Shell runs when Exec.Argv is empty (default /bin/bash if present, else
	// /bin/sh).
	Shell string
	// WatchDir, if set, is watched recursively and its changes are sent as
	// FileEvents.
	WatchDir string
	// WatchDelay is how long file events are held for coalescing (default
	// 100ms).
	WatchDelay time.Duration
	// Setup runs after the Hello exchange and before Ready (install the CA
	// the host sent, set the clock). The Ready it returns is sent; its Env,
	// if any, is laid over the base environment, and the resulting base is
	// reported in Ready.Env. An error is sent to the host and ends Serve.
	Setup func(ctx context.Context, host proto.Hello) (proto.Ready, error)
	// StdinWindow is each session's stdin window (default
	// proto.DefaultWindow).
	StdinWindow uint32
	// DrainTimeout is how long output is still read after the command
	// exited, for a background process that keeps the pipe or terminal
	// open (default 1s). Output already written is always read in full.
	DrainTimeout time.Duration
	// MaxSessions bounds concurrent sessions (default 256).
	MaxSessions int
	// Workspace, if set, is the workspace's mount, which Freeze takes down
	// and Thaw puts back: QEMU refuses to migrate a guest with a 9p export
	// mounted. nil: Freeze has nothing to unmount.
	Workspace *Workspace
	// SetClock sets the wall clock to the host's at Thaw: a restored
	// guest's clock stopped when it was saved. nil leaves the clock alone
	// (an agent served outside its guest, as in tests, has no clock of its
	// own to set).
	SetClock func(time.Time) error
	// Reseed mixes the host's randomness into the kernel's entropy pool
	// and reseeds its generator at Thaw (AddEntropy): a restored or forked
	// guest's generator is a copy of another guest's. nil: not done.
	Reseed func(seed []byte) error
	// Conns, if set, brings the host's later connections, for a transport
	// whose connection does not survive a snapshot: under Apple's
	// Virtualization framework a restored guest's vsock connections are
	// reset and its new host dials again. One that arrives while frozen
	// replaces the stream (the old one is closed), and the new host's
	// Thaw (proto.Resume) goes on from there; one that arrives otherwise
	// is closed, since a guest has one host at a time. nil: the stream
	// Serve was given is the only one (a virtio-serial port, which a
	// restored guest keeps).
	Conns  <-chan io.ReadWriteCloser
	Logger *slog.Logger
}

// Workspace is a mounted workspace the agent unmounts for a snapshot and
// mounts again after it (freeze_linux.go).
type Workspace struct {
	// Path is the mount point; the processes holding anything under it
	// are what keeps Unmount from succeeding (Holders).
	Path string
	// Deferred: boot left it unmounted (capsem.wsdefer=1) so that a
	// snapshot could be taken first; the first Thaw mounts it.
	Deferred bool
	// Mount mounts it at Path and returns its filesystem type ("9p").
	Mount func() (fstype string, err error)
	// Unmount unmounts it; it fails (EBUSY) while a process holds a
	// directory or file under Path.
	Unmount func() error
}

func (c *Config) defaults() {
	if c.Kernel == "" {
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			c.Kernel = unix.ByteSliceToString(u.Release[:])
		}
	}
	if c.Shell == "" {
		c.Shell = DefaultShell()
	}
	if c.Env == nil {
		c.Env = DefaultEnv(c.Shell)
	}
	if c.Dir == "" {
		c.Dir = "/"
	}
	if c.WatchDelay <= 0 {
		c.WatchDelay = 100 * time.Millisecond
	}
	if c.StdinWindow == 0 || c.StdinWindow > proto.MaxWindow {
		c.StdinWindow = proto.DefaultWindow
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = time.Second
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 256
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// server is one connection's state.
type server struct {
	cfg  Config
	conn *proto.Conn
	log  *slog.Logger
	env  []string // base environment
	// watcher is replaced as Freeze stops it and Thaw starts it again,
	// while sessions flush it.
	watcher atomic.Pointer[Watcher]

	// Owned by the loop goroutine: frozen between Frozen and Thaw (sends
	// held, Exec refused); wsMounted says the workspace (cfg.Workspace) is
	// mounted.
	frozen    bool
	wsMounted bool
	// isFrozen mirrors frozen for the goroutine taking Config.Conns; next
	// hands the loop the connection it took (rebind_linux.go).
	isFrozen atomic.Bool
	next     chan io.ReadWriteCloser

	rwMu sync.Mutex
	rw   io.ReadWriteCloser // the stream: Serve's, or the last from Conns

	mu       sync.Mutex
	sessions map[uint32]*session
	wg       sync.WaitGroup
	closing  bool
}

// Serve speaks the agent's side of the protocol over rw until the host
// sends Shutdown (ErrShutdown), the stream ends (io.EOF) or ctx is done.
// When it returns, every session's process group has been killed and rw is
// closed (and so is a later connection from Config.Conns).
//
// The agent speaks first: on a virtio-serial port a write waits until the
// host end is connected, while a read would return EOF at once.
func Serve(ctx context.Context, rw io.ReadWriteCloser, cfg Config) error {
	cfg.defaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{cfg: cfg, conn: proto.NewConn(rw), log: cfg.Logger, sessions: map[uint32]*session{}, rw: rw, next: make(chan io.ReadWriteCloser, 1)}
	stop := context.AfterFunc(ctx, s.closeStream)
	defer stop()
	defer func() {
		s.closeStream()
		select {
		case rw := <-s.next:
			rw.Close()
		default:
		}
	}()
	if cfg.Conns != nil {
		go s.takeConns(ctx)
	}
	s.wsMounted = cfg.Workspace != nil && !cfg.Workspace.Deferred
	defer s.shutdown()

	host, err := s.conn.AgentHandshake(proto.Hello{
		Agent:    cfg.Version,
		Kernel:   cfg.Kernel,
		Arch:     runtime.GOARCH,
		Window:   cfg.StdinWindow,
		Features: proto.AgentFeatures,
	})
	if err != nil {
		return err
	}
	s.log.Info("host connected", "host", host.Host)
	var ready proto.Ready
	if cfg.Setup != nil {
		ready, err = cfg.Setup(ctx, host)
		if err != nil {
			_ = s.conn.Send(proto.Error{Msg: "guest setup failed: " + err.Error()})
			return fmt.Errorf("agent: setup: %w", err)
		}
	}
	s.env, err = BuildEnv(cfg.Env, ready.Env)
	if err != nil {
		_ = s.conn.Send(proto.Error{Msg: "guest setup failed: " + err.Error()})
		return fmt.Errorf("agent: setup: %w", err)
	}
	ready.Env = s.env
	if err := s.startWatcher(InitialScanBudget); err != nil {
		ready.Warnings = append(ready.Warnings, "no file events: "+err.Error())
		s.log.Warn("no file events", "err", err)
	}
	if err := s.conn.Send(ready); err != nil {
		return err
	}
	return s.loop(ctx)
}

func (s *server) loop(ctx context.Context) error {
	for {
		m, err := s.conn.Recv()
		if errors.Is(err, proto.ErrMalformed) {
			s.log.Warn("malformed message from the host, ignored", "err", err)
			_ = s.conn.Send(proto.Error{Msg: err.Error()})
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if s.frozen && s.cfg.Conns != nil {
				if err := s.rebind(ctx, err); err != nil {
					return err
				}
				continue
			}
			return err
		}
		switch m := m.(type) {
		case proto.Exec:
			s.exec(m)
		case proto.Stdin:
			if ss := s.session(m.ID); ss != nil {
				if err := ss.stdin.Push(m.Data); err != nil {
					_ = s.conn.Send(proto.Error{Msg: fmt.Sprintf("session %d: %v", m.ID, err)})
					return err
				}
			}
		case proto.StdinClose:
			if ss := s.session(m.ID); ss != nil {
				ss.stdin.CloseWrite(nil)
			}
		case proto.Signal:
			if ss := s.session(m.ID); ss != nil {
				ss.signal(m.Sig)
			}
		case proto.Resize:
			if ss := s.session(m.ID); ss != nil && ss.pty != nil {
				if err := setWinsize(ss.pty, m.Rows, m.Cols); err != nil {
					s.log.Warn("resize", "session", m.ID, "err", err)
				}
			}
		case proto.Window:
			if ss := s.session(m.ID); ss != nil {
				var err error
				switch m.Stream {
				case proto.StreamStdout:
					err = ss.outCredit.Add(m.N)
				case proto.StreamStderr:
					err = ss.errCredit.Add(m.N)
				}
				if err != nil {
					_ = s.conn.Send(proto.Error{Msg: fmt.Sprintf("session %d: %v", m.ID, err)})
					return err
				}
			}
		case proto.Ping:
			if s.frozen {
				// Held: the send cannot block, and the Pong is queued
				// before a restored Thaw drops what the old host was owed.
				_ = s.conn.Send(proto.Pong(m))
			} else {
				go func() { _ = s.conn.Send(proto.Pong(m)) }()
			}
		case proto.Freeze:
			if err := s.freeze(m); err != nil {
				return err
			}
		case proto.Thaw:
			if err := s.thaw(m); err != nil {
				return err
			}
		case proto.Shutdown:
			s.log.Info("shutdown requested", "reason", m.Reason)
			return ErrShutdown
		case proto.Error:
			s.log.Warn("host error", "session", m.ID, "msg", m.Msg)
		case proto.Pong, proto.Unknown:
		default:
			s.log.Warn("unexpected message from the host, ignored", "type", m.Type())
		}
	}
}

func (s *server) session(id uint32) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func (s *server) exec(ex proto.Exec) {
	fail := func(code int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		s.log.Info("exec failed", "session", ex.ID, "err", msg)
		_ = s.conn.Send(proto.Error{ID: ex.ID, Msg: msg, Code: code})
	}
	if s.frozen {
		fail(0, "exec: the sandbox is being snapshotted; run the command again once it resumes")
		return
	}
	s.mu.Lock()
	switch {
	case ex.ID == 0:
		s.mu.Unlock()
		fail(0, "exec: session id 0 is reserved")
		return
	case s.sessions[ex.ID] != nil:
		s.mu.Unlock()
		fail(0, "exec: session %d is already running", ex.ID)
		return
	case len(s.sessions) >= s.cfg.MaxSessions:
		s.mu.Unlock()
		fail(126, "exec: %d sessions are running, the limit", len(s.sessions))
		return
	case s.closing:
		s.mu.Unlock()
		return
	}
	ss, err := s.start(ex)
	if err != nil {
		s.mu.Unlock()
		fail(ExitCodeFor(err), "%v", err)
		return
	}
	s.sessions[ex.ID] = ss
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("exec", "session", ex.ID, "pid", ss.pid, "argv", ss.argv, "tty", ex.TTY)
	_ = ss.send(proto.Started{ID: ex.ID, PID: ss.pid})
	go func() {
		defer s.wg.Done()
		ss.run()
		s.mu.Lock()
		if s.sessions[ex.ID] == ss { // not a new host's session of the same id
			delete(s.sessions, ex.ID)
		}
		s.mu.Unlock()
	}()
}

// shutdown kills every session's process group and waits (briefly) for the
// sessions to wind down.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closing = true
	for _, ss := range s.sessions {
		ss.kill()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.log.Warn("sessions still winding down after 5s")
	}
	if w := s.watcher.Swap(nil); w != nil {
		w.Close()
	}
}
