package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

// goneGrace is how long a command whose client went away has after HUP
// before it is killed.
const goneGrace = 2 * time.Second

// killGrace is how long a command has to end after KILL before the request
// gives it up.
const killGrace = 5 * time.Second

// maxBufferedOutput caps each of stdout and stderr in a buffered exec's
// JSON answer; beyond it the output is cut and says so. The Python and
// TypeScript clients' exec() cut at the same (MAX_BUFFERED,
// clientcap_test.go).
const maxBufferedOutput = 16 << 20

// execStartTimeout bounds the wait for the guest to start a command (its
// agent's Started): under TCG a start takes milliseconds, a busy guest's
// a second or two. A guest that never answers otherwise held the request
// and a session slot until the client went away — and a client without a
// timeout never does.
var execStartTimeout = time.Minute

func readExecRequest(w http.ResponseWriter, r *http.Request) (ExecRequest, bool) {
	var req ExecRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		WriteError(w, http.StatusBadRequest, "the body must be one ExecRequest as JSON ({\"argv\": [\"echo\", \"hi\"]}, see docs/API.md): "+err.Error())
		return req, false
	}
	if req.TimeoutMS < 0 {
		WriteError(w, http.StatusBadRequest, "timeout_ms must not be negative (0: no timeout)")
		return req, false
	}
	return req, true
}

func (req ExecRequest) exec() proto.Exec {
	return proto.Exec{Argv: req.Argv, Env: req.Env, Dir: req.Workdir, TTY: req.TTY, Rows: req.Rows, Cols: req.Cols}
}

// serveExec runs a command: streamed over frames when the request asks to
// upgrade to ExecProtocol, else with no stdin and its output returned in
// one JSON answer (for curl and scripts).
func serveExec(b Backend, w http.ResponseWriter, r *http.Request) {
	req, ok := readExecRequest(w, r)
	if !ok {
		return
	}
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), ExecProtocol)
	// The request's context: a client that goes away before the command
	// started takes its session with it.
	ctx, cancel := context.WithTimeoutCause(r.Context(), execStartTimeout,
		fmt.Errorf("%w: the guest did not start the command within %v", context.DeadlineExceeded, execStartTimeout))
	s, err := b.Exec(ctx, req.exec())
	cancel()
	if err != nil {
		exit, ok := startError(err)
		if !ok {
			WriteError(w, http.StatusServiceUnavailable, "the command could not be started: "+err.Error())
			return
		}
		if !upgrade {
			writeJSON(w, http.StatusOK, BufferedExit{Exit: exit})
			return
		}
		conn, rw, herr := hijack(w)
		if herr != nil {
			return
		}
		_ = WriteFrame(rw, FrameExit, mustJSON(exit))
		_ = rw.Flush()
		closeExec(conn, rw.Reader, nil)
		return
	}
	if !upgrade {
		serveBuffered(s, req, w, r.Context().Done())
		return
	}
	conn, rw, err := hijack(w)
	if err != nil {
		_ = s.Signal("KILL")
		return
	}
	reading := streamExec(s, req, rw.Reader, &lockedWriter{w: rw})
	closeExec(conn, rw.Reader, reading)
}

// execLinger is how long an exec's connection is kept open for reading
// after its exit frame went out, at most: until the client closes it.
const execLinger = 2 * time.Second

// closeExec ends an upgraded exec's connection once the exit frame is out
// so that the client reads it. Closed at once, a connection the client
// still writes to (the end of stdin sent with the request to a command
// not found, a signal racing the exit) fails the client's write, and
// node's net.Socket and asyncio's transport drop what they had received
// unread with it: the TypeScript client lost the exit frame of a command
// not found 1 run in 5. So the server ends its side (FIN: the client reads
// the exit, then EOF), reads and drops what the client still sends until
// it closes or execLinger passes, and closes. reading, when not nil, is
// closed once streamExec's reader of the client's frames has stopped.
func closeExec(conn net.Conn, in io.Reader, reading <-chan struct{}) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(execLinger))
		if reading != nil {
			<-reading // the client's close or the deadline ends it
		}
		_, _ = io.Copy(io.Discard, in)
	}
	_ = conn.Close()
}

// hijack takes the connection over and answers 101 Switching Protocols.
func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "cannot take the connection over for a streamed exec: "+err.Error())
		return nil, nil, err
	}
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ExecProtocol)
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, rw, nil
}

// lockedWriter serialises the frames of the output goroutines, flushing
// each so that output reaches the client as the command writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.ReadWriter
}

func (l *lockedWriter) frame(typ byte, p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := WriteFrame(l.w, typ, p); err != nil {
		return err
	}
	return l.w.Flush()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// streamExec relays session s over frames until it exits: output out,
// stdin, signals and resizes in. A client that goes away gets its
// command hung up on, then killed.
func streamExec(s *proto.Session, req ExecRequest, in io.Reader, out *lockedWriter) (reading <-chan struct{}) {
	var outputs sync.WaitGroup
	relay := func(typ byte, r io.Reader) {
		defer outputs.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if out.frame(typ, buf[:n]) != nil {
					_, _ = io.Copy(io.Discard, r) // keep the guest's credit flowing
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	outputs.Add(2)
	go relay(FrameStdout, s.Stdout())
	go relay(FrameStderr, s.Stderr())

	gone := make(chan struct{})
	go func() {
		defer close(gone)
		var buf []byte
		for {
			typ, p, err := ReadFrame(in, buf)
			if err != nil {
				return
			}
			buf = p[:0]
			switch typ {
			case FrameStdin:
				if _, err := s.Write(p); err != nil {
					return
				}
			case FrameStdinClose:
				_ = s.CloseStdin()
			case FrameSignal:
				_ = s.Signal(string(p))
			case FrameResize:
				if len(p) == 4 {
					_ = s.Resize(binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]))
				}
			}
		}
	}()

	exit := waitExit(s, req, gone)
	outputs.Wait()
	_ = out.frame(FrameExit, mustJSON(exit))
	return gone
}

// waitExit waits for s to end, killing it after the request's timeout or
// once gone is closed (the client went away: HUP, then KILL after
// goneGrace), and returns its Exit. A command the guest does not end within
// killGrace of KILL is given up (its session cancelled, its slot freed): a
// guest that answers everything but never reports the end must not hold
// the request, nor the timeout, for ever.
func waitExit(s *proto.Session, req ExecRequest, gone <-chan struct{}) Exit {
	var timeout, grace, abandon <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	kill := func() {
		_ = s.Signal("KILL")
		if abandon == nil {
			abandon = time.After(killGrace)
		}
	}
	timedOut := false
	for done := false; !done; {
		select {
		case <-s.Done():
			done = true
		case <-timeout:
			timedOut = true
			kill()
		case <-gone:
			gone = nil
			_ = s.Signal("HUP")
			grace = time.After(goneGrace)
		case <-grace:
			kill()
		case <-abandon:
			s.Cancel(fmt.Errorf("api: the guest did not end the command within %v of KILL", killGrace))
			done = true
		}
	}
	pe, err := s.Wait()
	exit := Exit{Code: pe.Code, Signal: pe.Signal}
	switch {
	case timedOut:
		exit = Exit{Code: ExitTimeout, Signal: "KILL", TimedOut: true}
	case err != nil:
		if e, ok := startError(err); ok {
			exit = e
		} else {
			exit = Exit{Code: -1, Error: "the guest ended the command abnormally: " + err.Error()}
		}
	}
	return exit
}

// BufferedExit is the answer to a POST /v1/exec that is not upgraded: the
// command's exit and its output as text (invalid UTF-8 replaced), each
// stream cut at 16 MiB.
type BufferedExit struct {
	Exit
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"` // an output was longer than 16 MiB and is cut
}

func serveBuffered(s *proto.Session, req ExecRequest, w http.ResponseWriter, gone <-chan struct{}) {
	_ = s.CloseStdin()
	var outs [2]strings.Builder
	var cut [2]bool
	var wg sync.WaitGroup
	for i, r := range []io.Reader{s.Stdout(), s.Stderr()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := io.Copy(&outs[i], io.LimitReader(r, maxBufferedOutput))
			if n == maxBufferedOutput {
				if m, _ := io.Copy(io.Discard, r); m > 0 {
					cut[i] = true
				}
			}
		}()
	}
	exit := waitExit(s, req, gone)
	wg.Wait()
	writeJSON(w, http.StatusOK, BufferedExit{
		Exit:      exit,
		Stdout:    strings.ToValidUTF8(outs[0].String(), "\uFFFD"),
		Stderr:    strings.ToValidUTF8(outs[1].String(), "\uFFFD"),
		Truncated: cut[0] || cut[1],
	})
}
