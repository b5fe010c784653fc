package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

var errSessionDone = errors.New("agent: session ended")

// session is one command the host asked for.
type session struct {
	srv   *server
	id    uint32
	argv  []string
	dir   string
	tty   bool
	cmd   *exec.Cmd
	pid   int
	start time.Time

	pty     *os.File // master, when tty
	stdinW  *os.File // pipes
	stdoutR *os.File
	stderrR *os.File

	stdin     *proto.Inbox
	outCredit *proto.Credit
	errCredit *proto.Credit

	exited atomic.Bool
	killed atomic.Bool

	// orphaned: the session belongs to a host the guest was frozen for
	// and restored away from (Thaw.Restored); nothing of it is sent any
	// more. sendMu makes the check and the send one step, so that no frame
	// of it follows orphan (send holds it shared).
	sendMu   sync.RWMutex
	orphaned bool
}

// send sends m for the session, unless it is orphaned.
func (ss *session) send(m proto.Message) error {
	ss.sendMu.RLock()
	defer ss.sendMu.RUnlock()
	if ss.orphaned {
		return errOrphaned
	}
	return ss.srv.conn.Send(m)
}

// orphan stops every later send of the session: its host is gone, and
// the new one does not know its id (and may reuse it).
func (ss *session) orphan() {
	ss.sendMu.Lock()
	ss.orphaned = true
	ss.sendMu.Unlock()
}

func (ss *session) isOrphaned() bool {
	ss.sendMu.RLock()
	defer ss.sendMu.RUnlock()
	return ss.orphaned
}

var errOrphaned = errors.New("agent: the session belongs to the host before a restore")

// start prepares and starts ex's process. Called with s.mu held.
func (s *server) start(ex proto.Exec) (*session, error) {
	argv := ex.Argv
	if len(argv) == 0 {
		argv = []string{s.cfg.Shell}
	}
	env, err := BuildEnv(s.env, ex.Env)
	if err != nil {
		return nil, fmt.Errorf("exec: %w: %w", err, ErrNotExecutable)
	}
	dir := ex.Dir
	if dir == "" {
		dir = s.cfg.Dir
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("exec: working directory %s: not a directory: %w", dir, ErrNotExecutable)
	}
	path, err := LookPath(argv[0], Getenv(env, "PATH"), dir)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	window := ex.Window
	if window == 0 {
		window = proto.DefaultWindow
	}
	if window > proto.MaxWindow {
		window = proto.MaxWindow
	}
	ss := &session{
		srv:       s,
		id:        ex.ID,
		argv:      argv,
		dir:       dir,
		tty:       ex.TTY,
		outCredit: proto.NewCredit(window),
		errCredit: proto.NewCredit(window),
	}
	ss.stdin = proto.NewInbox(s.cfg.StdinWindow, func(n uint32) {
		_ = ss.send(proto.Window{ID: ex.ID, Stream: proto.StreamStdin, N: n})
	})
	if Getenv(env, "PWD") == "" {
		env = append(env, "PWD="+dir) // as a shell would set it; programs read it
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: dir}
	var childEnds []*os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	if ex.TTY {
		master, slave, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		if err := setWinsize(master, ex.Rows, ex.Cols); err != nil {
			closeAll(master, slave)
			return nil, fmt.Errorf("exec: set the terminal size: %w", err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		// A new session whose controlling terminal is the pty (child fd 0):
		// the child leads the terminal's foreground process group, so ^C
		// written to the master interrupts it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		ss.pty = master
		childEnds = []*os.File{slave}
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW)
			return nil, fmt.Errorf("exec: %w", err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, fmt.Errorf("exec: %w", err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		// Its own process group, so a signal reaches its children too.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		ss.stdinW, ss.stdoutR, ss.stderrR = inW, outR, errR
		childEnds = []*os.File{inR, outW, errW}
	}
	ss.start = time.Now()
	err = cmd.Start()
	closeAll(childEnds...) // the child has its copies; ours would hold the streams open
	if err != nil {
		closeAll(ss.pty, ss.stdinW, ss.stdoutR, ss.stderrR)
		return nil, fmt.Errorf("exec: %w", err)
	}
	ss.cmd, ss.pid = cmd, cmd.Process.Pid
	return ss, nil
}

// run pumps the session's streams until the process has exited and its
// output is drained, then reports ExecEvent and Exit.
func (ss *session) run() {
	go ss.pumpStdin()
	var pumps sync.WaitGroup
	out := ss.stdoutR
	if ss.tty {
		out = ss.pty
	}
	pumps.Add(1)
	go func() {
		defer pumps.Done()
		ss.pumpOut(out, proto.TypeStdout, ss.outCredit)
	}()
	if !ss.tty {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			ss.pumpOut(ss.stderrR, proto.TypeStderr, ss.errCredit)
		}()
	}

	_ = ss.cmd.Wait()
	ss.exited.Store(true)
	// A background process may hold the pipe or terminal open: stop reading
	// once it has been idle for DrainTimeout (pumpOut re-arms the deadline
	// before each read from now on).
	drain := time.Now().Add(ss.srv.cfg.DrainTimeout)
	for _, f := range []*os.File{ss.stdoutR, ss.stderrR, ss.pty} {
		if f != nil {
			_ = f.SetReadDeadline(drain)
		}
	}
	pumps.Wait()
	dur := time.Since(ss.start)

	exit := proto.Exit{ID: ss.id, Code: 255}
	if ps := ss.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit.Code = 128 + int(ws.Signal())
			exit.Signal = SignalName(ws.Signal())
		} else {
			exit.Code = ps.ExitCode()
		}
	}
	// File events caused by the command reach the host before its Exit.
	if w := ss.srv.watcher.Load(); w != nil && !ss.isOrphaned() {
		w.Flush()
	}
	_ = ss.send(proto.ExecEvent{
		ID: ss.id, Argv: ss.argv, Dir: ss.dir, TTY: ss.tty, PID: ss.pid,
		Start: ss.start.UnixNano(), Duration: int64(dur), ExitCode: exit.Code, Signal: exit.Signal,
	})
	_ = ss.send(exit)
	ss.srv.log.Info("exit", "session", ss.id, "code", exit.Code, "signal", exit.Signal, "duration", dur)

	ss.stdin.CloseWithError(errSessionDone)
	ss.outCredit.Close(errSessionDone)
	ss.errCredit.Close(errSessionDone)
	for _, f := range []*os.File{ss.stdinW, ss.stdoutR, ss.stderrR, ss.pty} {
		if f != nil {
			f.Close()
		}
	}
}

// pumpOut sends what the command writes on r, in frames of at most
// proto.MaxData bytes, never more than the host's credit: without credit it
// stops reading and the command blocks in write(2).
func (ss *session) pumpOut(r *os.File, t proto.Type, credit *proto.Credit) {
	buf := make([]byte, proto.MaxData)
	for {
		if ss.exited.Load() {
			_ = r.SetReadDeadline(time.Now().Add(ss.srv.cfg.DrainTimeout))
		}
		n, err := r.Read(buf)
		for p := buf[:n]; len(p) > 0; {
			k, cerr := credit.Take(len(p))
			if cerr != nil {
				return
			}
			var m proto.Message = proto.Stdout{ID: ss.id, Data: p[:k]}
			if t == proto.TypeStderr {
				m = proto.Stderr{ID: ss.id, Data: p[:k]}
			}
			if ss.send(m) != nil {
				return
			}
			p = p[k:]
		}
		if err != nil {
			// io.EOF (pipe), EIO (pty, all slave ends closed), a deadline
			// after exit, or the file closed by a kill.
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				ss.srv.log.Warn("reading command output", "session", ss.id, "err", err)
			}
			return
		}
	}
}

// pumpStdin writes what the host sends to the command's stdin (pipe or
// terminal), returning credit as it goes. If the command stops reading
// (closed its stdin), the rest is discarded so the host never blocks.
func (ss *session) pumpStdin() {
	buf := make([]byte, proto.MaxData)
	var w io.Writer = ss.stdinW
	if ss.tty {
		w = ss.pty
	}
	broken := false
	for {
		n, err := ss.stdin.Read(buf)
		if n > 0 && !broken {
			if _, werr := w.Write(buf[:n]); werr != nil {
				broken = true
			}
		}
		if err == io.EOF {
			if ss.tty {
				if !broken {
					_, _ = ss.pty.Write([]byte{eofChar(ss.pty)})
				}
			} else {
				ss.stdinW.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// signal sends the named signal to the command's process group, and on a
// terminal to its foreground process group (a job the shell started).
func (ss *session) signal(name string) {
	sig, err := ParseSignal(name)
	if err != nil {
		_ = ss.send(proto.Error{Msg: fmt.Sprintf("session %d: %v", ss.id, err)})
		return
	}
	if ss.exited.Load() {
		return
	}
	if ss.tty {
		if fg, err := foregroundPgrp(ss.pty); err == nil && fg > 0 && fg != ss.pid {
			_ = unix.Kill(-fg, sig)
		}
	}
	if err := unix.Kill(-ss.pid, sig); err != nil {
		_ = unix.Kill(ss.pid, sig)
	}
}

// kill ends the session at once: its process group is killed and its
// streams are released so the pumps return.
func (ss *session) kill() {
	if ss.killed.Swap(true) {
		return
	}
	if !ss.exited.Load() {
		if ss.tty {
			if fg, err := foregroundPgrp(ss.pty); err == nil && fg > 0 && fg != ss.pid {
				_ = unix.Kill(-fg, unix.SIGKILL)
			}
		}
		_ = unix.Kill(-ss.pid, unix.SIGKILL)
	}
	ss.stdin.CloseWithError(errSessionDone)
	ss.outCredit.Close(errSessionDone)
	ss.errCredit.Close(errSessionDone)
}
