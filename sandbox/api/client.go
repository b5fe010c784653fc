package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"

	"github.com/capsem/capsem/guest/proto"
)

// Client talks to one supervisor over its unix socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client of the supervisor listening on socket. Each
// connection is checked to be served by our own uid before a byte is sent
// (dial).
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, socket)
		},
		DisableCompression: true,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// Close closes the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// url is the request URL of path: the host part is not used on a unix
// socket, but HTTP/1.1 wants one.
func (c *Client) url(path string, q url.Values) string {
	u := "http://capsem" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// send sends req and returns its answer when it is a success (the caller
// closes its body), else the error it carries.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// responseError reads an error response.
func responseError(resp *http.Response) error {
	var eb ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		eb.Error = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return &Error{Status: resp.StatusCode, Message: eb.Error}
}

// Status is GET /v1/sandbox.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, PathSandbox, nil, nil, &st)
	return st, err
}

// Stop is POST /v1/stop: the supervisor begins powering the guest off.
func (c *Client) Stop(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, PathStop, nil, nil, nil)
}

// ReloadPolicy is POST /v1/policy/reload.
func (c *Client) ReloadPolicy(ctx context.Context) (Reload, error) {
	var rl Reload
	err := c.do(ctx, http.MethodPost, PathPolicyReload, nil, nil, &rl)
	return rl, err
}

// StoreCopy is POST /v1/store/copy.
func (c *Client) StoreCopy(ctx context.Context) (StoreCopy, error) {
	var snap StoreCopy
	err := c.do(ctx, http.MethodPost, PathStoreCopy, nil, nil, &snap)
	return snap, err
}

// PutFile is PUT /v1/files: r becomes the guest's file at path (mode ""
// keeps the default, 0644 under umask 022).
func (c *Client) PutFile(ctx context.Context, path string, r io.Reader, mode string) error {
	q := url.Values{"path": {path}}
	if mode != "" {
		q.Set("mode", mode)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.url(PathFiles, q), r)
	if err != nil {
		return err
	}
	// The server takes the fast path when it knows the size first.
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil {
				req.ContentLength = st.Size() - off
			}
		}
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// GetFile is GET /v1/files: the guest's file at path, written to w. It
// returns its size.
func (c *Client) GetFile(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathFiles, url.Values{"path": {path}}), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(w, resp.Body, make([]byte, 256<<10))
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("api: %s: got %d of %d bytes", path, n, resp.ContentLength)
	}
	return n, err
}

// Events is GET /v1/events: fn gets each line (one row of the export, as
// JSON) of the session's events after sequence number since; with follow
// it returns when the sandbox stops or ctx ends.
func (c *Client) Events(ctx context.Context, since uint64, follow bool, fn func(json.RawMessage) error) error {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if follow {
		q.Set("follow", "1")
	}
	return c.lines(ctx, PathEvents, q, 64<<20, func(line []byte) error { return fn(json.RawMessage(line)) })
}

// lines GETs path?q and calls fn with each line of the NDJSON answer (at
// most max bytes each) until it ends or fn fails.
func (c *Client) lines(ctx context.Context, path string, q url.Values, max int, fn func([]byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path, q), nil)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), max)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Exec starts a streamed exec: POST /v1/exec upgraded to ExecProtocol.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (*ExecSession, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	conn, err := dial(ctx, c.socket)
	if err != nil {
		return nil, err
	}
	hreq, _ := http.NewRequest(http.MethodPost, c.url(PathExec, nil), bytes.NewReader(body))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", ExecProtocol)
	if err := hreq.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		return nil, responseError(resp)
	}
	s := &ExecSession{conn: conn, done: make(chan struct{})}
	var so, se *io.PipeWriter
	s.stdout, so = io.Pipe()
	s.stderr, se = io.Pipe()
	go s.read(br, so, se)
	return s, nil
}

// ExecSession is a command running through the API. It has the methods of
// a guest session (guest/proto.Session), so that what drives one drives
// the other.
type ExecSession struct {
	conn   net.Conn
	wmu    sync.Mutex
	stdout *io.PipeReader
	stderr *io.PipeReader
	done   chan struct{}
	exit   Exit
	err    error
}

func (s *ExecSession) read(r io.Reader, so, se *io.PipeWriter) {
	defer close(s.done)
	var buf []byte
	for {
		typ, p, err := ReadFrame(r, buf)
		if err != nil {
			s.err = fmt.Errorf("api: the exec's connection ended before its exit: %w", err)
			so.CloseWithError(s.err)
			se.CloseWithError(s.err)
			return
		}
		buf = p[:0]
		switch typ {
		case FrameStdout:
			_, _ = so.Write(p)
		case FrameStderr:
			_, _ = se.Write(p)
		case FrameExit:
			so.Close()
			se.Close()
			if err := json.Unmarshal(p, &s.exit); err != nil {
				s.err = fmt.Errorf("api: exit frame: %w", err)
			}
			s.conn.Close()
			return
		}
	}
}

func (s *ExecSession) Stdout() io.Reader { return s.stdout }
func (s *ExecSession) Stderr() io.Reader { return s.stderr }

func (s *ExecSession) frame(typ byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return WriteFrame(s.conn, typ, p)
}

// Write sends p to the command's stdin.
func (s *ExecSession) Write(p []byte) (int, error) {
	if err := s.frame(FrameStdin, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *ExecSession) CloseStdin() error       { return s.frame(FrameStdinClose, nil) }
func (s *ExecSession) Signal(sig string) error { return s.frame(FrameSignal, []byte(sig)) }

func (s *ExecSession) Resize(rows, cols uint16) error {
	var p [4]byte
	binary.BigEndian.PutUint16(p[:], rows)
	binary.BigEndian.PutUint16(p[2:], cols)
	return s.frame(FrameResize, p[:])
}

// Done is closed once the exit arrived or the connection broke.
func (s *ExecSession) Done() <-chan struct{} { return s.done }

// Wait returns the command's exit as a guest session gives it: an error
// with the shell's code when the command did not start (127 not found).
func (s *ExecSession) Wait() (proto.Exit, error) {
	<-s.done
	if s.err != nil {
		return proto.Exit{}, s.err
	}
	if s.exit.Error != "" {
		return proto.Exit{Code: s.exit.Code}, proto.Error{Msg: s.exit.Error, Code: s.exit.Code}
	}
	return proto.Exit{Code: s.exit.Code, Signal: s.exit.Signal}, nil
}

// Exit is the exit frame as the server sent it (TimedOut included), once
// Done is closed.
func (s *ExecSession) Exit() Exit {
	<-s.done
	return s.exit
}

// Close ends the connection: the supervisor hangs up on the command.
func (s *ExecSession) Close() error { return s.conn.Close() }

// TakeSnapshot is POST /v1/snapshots: the guest saved as snapshot tag
// ("": the time).
func (c *Client) TakeSnapshot(ctx context.Context, tag string) (Snapshot, error) {
	b, err := json.Marshal(SnapshotRequest{Tag: tag})
	if err != nil {
		return Snapshot{}, err
	}
	var snap Snapshot
	err = c.do(ctx, http.MethodPost, PathSnapshots, nil, bytes.NewReader(b), &snap)
	return snap, err
}

// Snapshots is GET /v1/snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]Snapshot, error) {
	var all []Snapshot
	err := c.do(ctx, http.MethodGet, PathSnapshots, nil, nil, &all)
	return all, err
}

// RemoveSnapshot is DELETE /v1/snapshots?tag=TAG.
func (c *Client) RemoveSnapshot(ctx context.Context, tag string) error {
	return c.do(ctx, http.MethodDelete, PathSnapshots, url.Values{"tag": {tag}}, nil, nil)
}

// Suspend is POST /v1/suspend: the guest saved, the sandbox stopped.
func (c *Client) Suspend(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	err := c.do(ctx, http.MethodPost, PathSuspend, nil, nil, &snap)
	return snap, err
}
