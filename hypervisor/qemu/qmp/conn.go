package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// maxLine bounds one message from QEMU. query-* answers of a microvm are a
// few KiB; a line past this is a broken or hostile peer, not an answer.
const maxLine = 4 << 20

// Options tunes a connection. The zero value is usable.
type Options struct {
	// OnEvent is called with every event QEMU sends, in order, on the
	// goroutine running the command during which it arrived. Nil: events
	// are dropped.
	OnEvent func(name string, data json.RawMessage)
}

// Version is QEMU's, from the greeting.
type Version struct {
	Major, Minor, Micro int
	Package             string // the distribution's build, e.g. "Debian 1:7.2+dfsg-7"
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro) }

// Error is a command QEMU refused: its error class (GenericError,
// CommandNotFound, DeviceNotFound, …) and description.
type Error struct {
	Command string
	Class   string
	Desc    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("qmp: %s: %s (%s)", e.Command, e.Desc, e.Class)
}

// Conn is one QMP connection, after the handshake.
type Conn struct {
	c       *net.UnixConn
	r       *bufio.Reader
	opts    Options
	version Version

	mu     sync.Mutex // one command at a time
	nextID uint64
}

// Dial connects to QEMU's QMP socket at path (-qmp unix:PATH,server=on)
// and completes the handshake.
func Dial(ctx context.Context, path string, opts Options) (*Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	q, err := New(ctx, c.(*net.UnixConn), opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

// New completes the handshake on c (an inherited end of a socketpair, or a
// dialled socket): QEMU's greeting, then qmp_capabilities. On error the
// caller closes c.
func New(ctx context.Context, c *net.UnixConn, opts Options) (*Conn, error) {
	q := &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10), opts: opts}
	stop := q.deadline(ctx)
	line, err := q.readLine()
	stop()
	if err != nil {
		return nil, fmt.Errorf("qmp: reading QEMU's greeting: %w", err)
	}
	var g struct {
		QMP *struct {
			Version struct {
				QEMU struct {
					Major int `json:"major"`
					Minor int `json:"minor"`
					Micro int `json:"micro"`
				} `json:"qemu"`
				Package string `json:"package"`
			} `json:"version"`
		} `json:"QMP"`
	}
	if err := json.Unmarshal(line, &g); err != nil || g.QMP == nil {
		return nil, fmt.Errorf("qmp: the peer's first line is not a QMP greeting: %.80q", line)
	}
	v := g.QMP.Version
	q.version = Version{Major: v.QEMU.Major, Minor: v.QEMU.Minor, Micro: v.QEMU.Micro, Package: v.Package}
	if err := q.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		return nil, err
	}
	return q, nil
}

// Version is the QEMU version the greeting announced.
func (q *Conn) Version() Version { return q.version }

// Close closes the connection; QEMU goes on.
func (q *Conn) Close() error { return q.c.Close() }

// Execute runs cmd with args (nil: none; else marshalled to a JSON object)
// and unmarshals its return value into out (nil: discarded). A command
// QEMU refuses is an *Error. ctx bounds the whole exchange: past its
// deadline the connection is unusable (a late answer would be taken for
// the next command's), and Execute says so.
func (q *Conn) Execute(ctx context.Context, cmd string, args, out any) error {
	return q.execute(ctx, cmd, args, out, nil)
}

// ExecuteFD is Execute with f's descriptor passed beside the command
// (SCM_RIGHTS): getfd and add-fd take the descriptor sent with them. f
// stays open; QEMU holds its own copy.
func (q *Conn) ExecuteFD(ctx context.Context, cmd string, args, out any, f *os.File) error {
	if f == nil {
		return errors.New("qmp: ExecuteFD without a file")
	}
	return q.execute(ctx, cmd, args, out, f)
}

func (q *Conn) execute(ctx context.Context, cmd string, args, out any, f *os.File) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	id := q.nextID
	req := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
		ID        uint64 `json:"id"`
	}{cmd, args, id}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("qmp: %s: arguments: %w", cmd, err)
	}
	b = append(b, '\n')
	stop := q.deadline(ctx)
	defer stop()
	if f != nil {
		_, _, err = q.c.WriteMsgUnix(b, unix.UnixRights(int(f.Fd())), nil)
	} else {
		_, err = q.c.Write(b)
	}
	if err != nil {
		return q.broken(ctx, cmd, err)
	}
	for {
		line, err := q.readLine()
		if err != nil {
			return q.broken(ctx, cmd, err)
		}
		var m struct {
			Event  string          `json:"event"`
			Data   json.RawMessage `json:"data"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			ID *uint64 `json:"id"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("qmp: %s: QEMU sent a line that is not JSON: %.80q", cmd, line)
		}
		switch {
		case m.Event != "":
			if q.opts.OnEvent != nil {
				q.opts.OnEvent(m.Event, m.Data)
			}
			continue
		case m.ID == nil || *m.ID != id:
			// Only an answer to a command this connection gave up on can
			// carry another id, and such a connection is closed (broken).
			return fmt.Errorf("qmp: %s: an answer without this command's id %d: %.80q", cmd, id, line)
		case m.Error != nil:
			return &Error{Command: cmd, Class: m.Error.Class, Desc: m.Error.Desc}
		}
		if out != nil && len(m.Return) > 0 {
			if err := json.Unmarshal(m.Return, out); err != nil {
				return fmt.Errorf("qmp: %s: its answer: %w", cmd, err)
			}
		}
		return nil
	}
}

// broken closes a connection whose exchange failed midway: an answer may
// still come, and would be read as the next command's.
func (q *Conn) broken(ctx context.Context, cmd string, err error) error {
	q.c.Close()
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket's deadline is ctx's and may fire a moment before
		// ctx reports it.
		err = context.DeadlineExceeded
	}
	return fmt.Errorf("qmp: %s: %w (the connection is closed: dial QEMU's QMP socket again to go on)", cmd, err)
}

// deadline applies ctx's deadline to the socket, and closes the exchange's
// reads when ctx is cancelled; the returned func undoes both.
func (q *Conn) deadline(ctx context.Context) func() {
	if d, ok := ctx.Deadline(); ok {
		q.c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { q.c.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		q.c.SetDeadline(time.Time{})
	}
}

// readLine reads one message; a line over maxLine is an error.
func (q *Conn) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := q.r.ReadSlice('\n')
		if len(line)+len(frag) > maxLine {
			return nil, fmt.Errorf("a message longer than %d bytes", maxLine)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}
