package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Version is the protocol version this package speaks. Both sides send it in
// Hello; a peer with another version is refused. New message types and new
// JSON fields may be added without changing it: receivers ignore unknown
// types (Recv returns them as Unknown) and unknown fields.
const Version = 1

// DefaultWindow is the receive window, in bytes per stream and session, used
// when a peer does not name one.
const DefaultWindow = 256 << 10

// MaxWindow bounds any window a peer may announce, so that a peer cannot make
// the other side promise unbounded buffering.
const MaxWindow = 16 << 20

// Type identifies a message on the wire. The values are part of the
// protocol: never renumber.
type Type uint8

const (
	TypeHello      Type = 1  // both ways, first frame: versions
	TypeReady      Type = 2  // agent → host: boot facts, the agent takes commands
	TypeShutdown   Type = 3  // host → agent: power off
	TypeExec       Type = 4  // host → agent: start a session
	TypeStarted    Type = 5  // agent → host: the session's process runs
	TypeStdin      Type = 6  // host → agent: raw bytes
	TypeStdinClose Type = 7  // host → agent: end of stdin
	TypeSignal     Type = 8  // host → agent: signal the session
	TypeResize     Type = 9  // host → agent: terminal size
	TypeStdout     Type = 10 // agent → host: raw bytes
	TypeStderr     Type = 11 // agent → host: raw bytes
	TypeExit       Type = 12 // agent → host: the session ended
	TypeError      Type = 13 // either way: a session (ID≠0) or the connection failed
	TypeWindow     Type = 14 // either way: credit for more data on one stream
	TypeFileEvent  Type = 15 // agent → host: a change in the watched workspace
	TypeExecEvent  Type = 16 // agent → host: a finished session, for the store
	TypePing       Type = 17 // either way: liveness
	TypePong       Type = 18 // the answer to Ping
	TypeFreeze     Type = 19 // host → agent: quiesce for a snapshot
	TypeFrozen     Type = 20 // agent → host: quiesced (or refused), the last frame before Thaw
	TypeThaw       Type = 21 // host → agent: resume after a snapshot (or a restore)
	TypeThawed     Type = 22 // agent → host: resumed
)

var typeNames = map[Type]string{
	TypeHello: "hello", TypeReady: "ready", TypeShutdown: "shutdown", TypeExec: "exec",
	TypeStarted: "started", TypeStdin: "stdin", TypeStdinClose: "stdin-close",
	TypeSignal: "signal", TypeResize: "resize", TypeStdout: "stdout", TypeStderr: "stderr",
	TypeExit: "exit", TypeError: "error", TypeWindow: "window", TypeFileEvent: "file-event",
	TypeExecEvent: "exec-event", TypePing: "ping", TypePong: "pong",
	TypeFreeze: "freeze", TypeFrozen: "frozen", TypeThaw: "thaw", TypeThawed: "thawed",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Message is one decoded frame. The concrete types are the structs below,
// always as values (switch m := msg.(type) { case proto.Stdout: … }).
type Message interface {
	Type() Type
}

// Hello is the first frame each side sends. The agent speaks first (on a
// virtio-serial port its write waits until the host is connected); the host
// answers with its own Hello; the agent then sends Ready.
type Hello struct {
	Proto  int    `json:"proto"`
	Agent  string `json:"agent,omitempty"`  // agent → host: the agent's version
	Kernel string `json:"kernel,omitempty"` // agent → host: the guest kernel release (uname -r)
	Arch   string `json:"arch,omitempty"`   // agent → host: GOARCH of the agent
	// Window is the sender's receive window for data it is sent, per
	// session and stream: from the agent, how much stdin a session may have
	// in flight. 0 means DefaultWindow.
	Window uint32 `json:"window,omitempty"`
	Host   string `json:"host,omitempty"` // host → agent: the host's version
	// Time is the host's wall clock (Unix nanoseconds) when it sent Hello;
	// the agent may set the guest clock from it.
	Time int64 `json:"time,omitempty"`
	// CA is a PEM certificate (the interception CA) the agent installs into
	// the guest's trust stores before Ready.
	CA string `json:"ca,omitempty"`
	// Features are the optional requests the sender answers (Feature*).
	// A peer ignores a message type it does not know, so a request the
	// other side never answers is not sent: Has says whether it would be.
	// Empty: none (an agent older than the first feature).
	Features []string `json:"features,omitempty"`
}

// FeatureFreeze: the agent answers Freeze with Frozen and Thaw with Thawed.
const FeatureFreeze = "freeze"

// AgentFeatures are the features this package's agent answers: the one
// list the agent sends and the tests check.
var AgentFeatures = []string{FeatureFreeze}

// Has reports whether h lists feature f.
func (h Hello) Has(f string) bool { return slices.Contains(h.Features, f) }

// Ready tells the host the guest is set up and takes commands. Its fields
// are boot facts for logs, `capsem doctor` and the store; all optional.
type Ready struct {
	Uptime    int64    `json:"uptime_ns,omitempty"` // guest uptime when Ready was sent
	Interface string   `json:"if,omitempty"`
	Addr      string   `json:"addr,omitempty"` // "198.18.0.2/24"
	Gateway   string   `json:"gw,omitempty"`
	DNS       []string `json:"dns,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	Root      string   `json:"root,omitempty"`      // "erofs /dev/vda (ro) + overlay"
	Workspace string   `json:"workspace,omitempty"` // mount point
	WSFS      string   `json:"ws_fs,omitempty"`     // "9p", "virtiofs"
	CAFiles   []string `json:"ca_files,omitempty"`  // trust stores the CA went into
	Modules   []string `json:"modules,omitempty"`   // kernel modules loaded
	Lockdown  []string `json:"lockdown,omitempty"`  // sysctls applied ("kernel.modules_disabled=1")
	Env       []string `json:"env,omitempty"`       // the base environment every command gets
	Warnings  []string `json:"warnings,omitempty"`  // steps that failed without stopping the boot
}

// Shutdown asks the agent to power the guest off.
type Shutdown struct {
	Reason string `json:"reason,omitempty"`
}

// Exec starts session ID (chosen by the host, non-zero, unused). Argv empty
// means the guest's interactive shell. Env is the command's whole
// environment on top of the guest's defaults (PATH, HOME, SHELL and the CA
// variables); the agent never adds its own environment.
type Exec struct {
	ID   uint32   `json:"-"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"` // "KEY=value"
	Dir  string   `json:"dir,omitempty"` // default: the workspace
	TTY  bool     `json:"tty,omitempty"` // a pty (stdout only, no stderr) instead of pipes
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
	// Window is the host's receive window per output stream; 0 means
	// DefaultWindow.
	Window uint32 `json:"window,omitempty"`
}

// Started says session ID's process is running (after Exec).
type Started struct {
	ID  uint32 `json:"-"`
	PID int    `json:"pid"`
}

// Stdin is input for session ID. The sender must hold credit for it (Window).
type Stdin struct {
	ID   uint32
	Data []byte
}

// StdinClose ends session ID's input: the pipe is closed, or on a pty the
// terminal's EOF character is written.
type StdinClose struct {
	ID uint32
}

// Signal sends a signal, by name without "SIG" ("INT", "TERM", "KILL",
// "HUP", "WINCH", …), to session ID's process group; on a pty to the
// terminal's foreground process group too. Names, not numbers: they differ
// between a macOS host and a Linux guest.
type Signal struct {
	ID  uint32 `json:"-"`
	Sig string `json:"sig"`
}

// Resize sets session ID's terminal size.
type Resize struct {
	ID   uint32 `json:"-"`
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Stdout is output of session ID (on a pty, all of it).
type Stdout struct {
	ID   uint32
	Data []byte
}

// Stderr is error output of session ID (pipes only).
type Stderr struct {
	ID   uint32
	Data []byte
}

// Exit ends session ID; every Stdout/Stderr of the session came before it.
// Code is the exit status, or 128+N when the process was killed by signal N
// (N the Linux number) and then Signal names it ("INT").
type Exit struct {
	ID     uint32 `json:"-"`
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

// Error reports a failure. With ID≠0 it ends that session (the command could
// not start, or the session broke); no Exit follows. Code is the exit status
// a shell would report (127 not found, 126 not executable), if any. With
// ID=0 it concerns the connection (a refused Hello, a malformed frame).
type Error struct {
	ID   uint32 `json:"-"`
	Msg  string `json:"msg"`
	Code int    `json:"code,omitempty"`
}

func (e Error) Error() string { return e.Msg }

// Streams of a session, for Window.
const (
	StreamStdin  uint8 = 0
	StreamStdout uint8 = 1
	StreamStderr uint8 = 2
)

// Window gives the peer N more bytes of credit on one stream of session ID.
// Body: stream (1 byte), N (uint32).
type Window struct {
	ID     uint32
	Stream uint8
	N      uint32
}

// File event actions.
const (
	ActionCreated  = "created"
	ActionModified = "modified"
	ActionDeleted  = "deleted"
	ActionRenamed  = "renamed"  // Path is the new name, OldPath the old
	ActionOverflow = "overflow" // the kernel dropped events; Path is the watched root
)

// FileEvent is a change under the watched workspace. Path (and OldPath) are
// relative to the workspace, slash-separated.
type FileEvent struct {
	Action  string `json:"action"`
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Time    int64  `json:"time"` // Unix nanoseconds, guest clock
}

// ExecEvent records a session the host asked for, after it ended (sent just
// before its Exit).
type ExecEvent struct {
	ID       uint32   `json:"-"`
	Argv     []string `json:"argv"`
	Dir      string   `json:"dir,omitempty"`
	TTY      bool     `json:"tty,omitempty"`
	PID      int      `json:"pid,omitempty"`
	Start    int64    `json:"start"`    // Unix nanoseconds, guest clock
	Duration int64    `json:"duration"` // nanoseconds
	ExitCode int      `json:"exit_code"`
	Signal   string   `json:"signal,omitempty"`
}

// Ping asks the peer for a Pong with the same Seq.
type Ping struct {
	Seq uint64 `json:"seq"`
}

// Pong answers a Ping.
type Pong struct {
	Seq uint64 `json:"seq"`
}

// Freeze asks the agent to quiesce the guest for a snapshot (QEMU
// migration). The agent flushes and stops its file watcher, syncs, unmounts
// the workspace (QEMU refuses to migrate while a 9p export is mounted) and
// answers Frozen; from then on it holds every frame it would send until
// Thaw, so that a snapshot never cuts a frame in two and the guest's state
// holds nothing half-written to a host it will not see again.
type Freeze struct {
	Reason string `json:"reason,omitempty"`
}

// Frozen answers Freeze. Refused empty: the agent is frozen and Frozen is
// the last frame it writes before Thaw. Refused set: it is not frozen and
// runs on as before; Refused says why (the workspace is in use) and Holders
// lists the processes holding the workspace ("1234 bash (cwd)",
// "99 python3 (fd 3)").
type Frozen struct {
	Refused string   `json:"refused,omitempty"`
	Holders []string `json:"holders,omitempty"`
}

// Thaw resumes a frozen agent, and may be sent to one that is not frozen
// (it then only sets the clock and reseeds), so that a host can always
// Thaw. A snapshot restored, or forked, is a guest whose wall clock stopped
// when it was saved and whose kernel random generator is a copy of another
// guest's: Time sets the clock and Seed is mixed into the kernel's entropy
// pool, which is reseeded. Restored says the stream is a new host's: the
// sessions of the host the guest was frozen for are killed, and nothing of
// theirs is sent (their ids mean nothing to the new host, which may reuse
// them).
type Thaw struct {
	Time     int64  `json:"time,omitempty"` // the host's wall clock, Unix nanoseconds
	Seed     []byte `json:"seed,omitempty"` // host randomness, MinSeed to MaxSeed bytes
	Restored bool   `json:"restored,omitempty"`
}

// The size of Thaw.Seed: 32 bytes is a full reseed of the kernel's CRNG;
// more is allowed, bounded so that one frame stays small.
const (
	MinSeed = 32
	MaxSeed = 512
)

// Thawed answers Thaw.
type Thawed struct {
	Uptime   int64    `json:"uptime_ns,omitempty"` // guest uptime when Thawed was sent
	Warnings []string `json:"warnings,omitempty"`  // steps that failed without stopping the thaw
	// Workspace and WSFS are set when this Thaw mounted the workspace
	// (after a Freeze unmounted it, or a boot that deferred it).
	Workspace string `json:"workspace,omitempty"`
	WSFS      string `json:"ws_fs,omitempty"`
}

// Unknown is a frame of a type this package does not know (from a newer
// peer). Receivers log and ignore it.
type Unknown struct {
	Frame Frame
}

func (Hello) Type() Type      { return TypeHello }
func (Ready) Type() Type      { return TypeReady }
func (Shutdown) Type() Type   { return TypeShutdown }
func (Exec) Type() Type       { return TypeExec }
func (Started) Type() Type    { return TypeStarted }
func (Stdin) Type() Type      { return TypeStdin }
func (StdinClose) Type() Type { return TypeStdinClose }
func (Signal) Type() Type     { return TypeSignal }
func (Resize) Type() Type     { return TypeResize }
func (Stdout) Type() Type     { return TypeStdout }
func (Stderr) Type() Type     { return TypeStderr }
func (Exit) Type() Type       { return TypeExit }
func (Error) Type() Type      { return TypeError }
func (Window) Type() Type     { return TypeWindow }
func (FileEvent) Type() Type  { return TypeFileEvent }
func (ExecEvent) Type() Type  { return TypeExecEvent }
func (Ping) Type() Type       { return TypePing }
func (Pong) Type() Type       { return TypePong }
func (Freeze) Type() Type     { return TypeFreeze }
func (Frozen) Type() Type     { return TypeFrozen }
func (Thaw) Type() Type       { return TypeThaw }
func (Thawed) Type() Type     { return TypeThawed }
func (u Unknown) Type() Type  { return u.Frame.Type }

// The messages of one session whose body is JSON: the session ID is left
// out of the body, the frame header carries it (Encode, decodeSession).
func (m Exec) sessionID() uint32      { return m.ID }
func (m Started) sessionID() uint32   { return m.ID }
func (m Signal) sessionID() uint32    { return m.ID }
func (m Resize) sessionID() uint32    { return m.ID }
func (m Exit) sessionID() uint32      { return m.ID }
func (m Error) sessionID() uint32     { return m.ID }
func (m ExecEvent) sessionID() uint32 { return m.ID }

func (m *Exec) setID(id uint32)      { m.ID = id }
func (m *Started) setID(id uint32)   { m.ID = id }
func (m *Signal) setID(id uint32)    { m.ID = id }
func (m *Resize) setID(id uint32)    { m.ID = id }
func (m *Exit) setID(id uint32)      { m.ID = id }
func (m *Error) setID(id uint32)     { m.ID = id }
func (m *ExecEvent) setID(id uint32) { m.ID = id }

// sessionJSON is a message of one session whose body is JSON.
type sessionJSON interface {
	Message
	sessionID() uint32
}

// ErrMalformed wraps every decoding error of a frame's body.
var ErrMalformed = errors.New("proto: malformed message")

// Encode turns m into a frame.
func Encode(m Message) (Frame, error) {
	switch m := m.(type) {
	case Stdin:
		return dataFrame(TypeStdin, m.ID, m.Data)
	case Stdout:
		return dataFrame(TypeStdout, m.ID, m.Data)
	case Stderr:
		return dataFrame(TypeStderr, m.ID, m.Data)
	case StdinClose:
		return Frame{Type: TypeStdinClose, ID: m.ID}, nil
	case Window:
		b := make([]byte, 5)
		b[0] = m.Stream
		binary.BigEndian.PutUint32(b[1:], m.N)
		return Frame{Type: TypeWindow, ID: m.ID, Body: b}, nil
	case Unknown:
		return m.Frame, nil
	case Exec, Started, Signal, Resize, Exit, Error, ExecEvent: // values, not pointers, like every arm
		return jsonFrame(m.Type(), m.(sessionJSON).sessionID(), m)
	case Hello, Ready, Shutdown, FileEvent, Ping, Pong, Freeze, Frozen, Thaw, Thawed:
		return jsonFrame(m.Type(), 0, m)
	case nil:
		return Frame{}, errors.New("proto: encode nil message")
	}
	return Frame{}, fmt.Errorf("proto: cannot encode %T", m)
}

func dataFrame(t Type, id uint32, data []byte) (Frame, error) {
	if len(data) > MaxBody {
		return Frame{}, fmt.Errorf("%w: %d bytes of %v (max %d)", ErrFrameTooLarge, len(data), t, MaxBody)
	}
	return Frame{Type: t, ID: id, Body: data}, nil
}

func jsonFrame(t Type, id uint32, v any) (Frame, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Frame{}, fmt.Errorf("proto: encode %v: %w", t, err)
	}
	if len(b) > MaxBody {
		return Frame{}, fmt.Errorf("%w: %v is %d bytes encoded (max %d)", ErrFrameTooLarge, t, len(b), MaxBody)
	}
	return Frame{Type: t, ID: id, Body: b}, nil
}

// Decode turns a frame into its message. A frame of an unknown type gives
// Unknown and no error. A known type with a body that does not decode gives
// an error wrapping ErrMalformed. Data messages keep f.Body without copying.
func Decode(f Frame) (Message, error) {
	switch f.Type {
	case TypeStdin:
		return Stdin{ID: f.ID, Data: f.Body}, nil
	case TypeStdout:
		return Stdout{ID: f.ID, Data: f.Body}, nil
	case TypeStderr:
		return Stderr{ID: f.ID, Data: f.Body}, nil
	case TypeStdinClose:
		if len(f.Body) != 0 {
			return nil, fmt.Errorf("%w: stdin-close with a %d-byte body", ErrMalformed, len(f.Body))
		}
		return StdinClose{ID: f.ID}, nil
	case TypeWindow:
		if len(f.Body) != 5 {
			return nil, fmt.Errorf("%w: window body is %d bytes, want 5", ErrMalformed, len(f.Body))
		}
		return Window{ID: f.ID, Stream: f.Body[0], N: binary.BigEndian.Uint32(f.Body[1:])}, nil
	case TypeHello:
		return decodeJSON[Hello](f)
	case TypeReady:
		return decodeJSON[Ready](f)
	case TypeShutdown:
		return decodeJSON[Shutdown](f)
	case TypeExec:
		return decodeSession[Exec](f)
	case TypeStarted:
		return decodeSession[Started](f)
	case TypeSignal:
		return decodeSession[Signal](f)
	case TypeResize:
		return decodeSession[Resize](f)
	case TypeExit:
		return decodeSession[Exit](f)
	case TypeError:
		return decodeSession[Error](f)
	case TypeExecEvent:
		return decodeSession[ExecEvent](f)
	case TypeFileEvent:
		return decodeJSON[FileEvent](f)
	case TypePing:
		return decodeJSON[Ping](f)
	case TypePong:
		return decodeJSON[Pong](f)
	case TypeFreeze:
		return decodeJSON[Freeze](f)
	case TypeFrozen:
		return decodeJSON[Frozen](f)
	case TypeThaw:
		return decodeJSON[Thaw](f)
	case TypeThawed:
		return decodeJSON[Thawed](f)
	}
	return Unknown{Frame: f}, nil
}

// decodeJSON decodes the JSON body of a frame of a session-less type.
func decodeJSON[T Message](f Frame) (Message, error) {
	var m T
	if err := unmarshal(f, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// sessionMessage is a pointer to a sessionJSON message.
type sessionMessage[T sessionJSON] interface {
	*T
	setID(id uint32)
}

// decodeSession decodes the JSON body of a frame of a session's message and
// gives it the frame's session ID.
func decodeSession[T sessionJSON, P sessionMessage[T]](f Frame) (Message, error) {
	var m T
	if err := unmarshal(f, &m); err != nil {
		return nil, err
	}
	P(&m).setID(f.ID)
	return m, nil
}

// unmarshal decodes f's JSON body into v; an empty body is the zero value.
func unmarshal(f Frame, v any) error {
	if len(f.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return fmt.Errorf("%w: %v: %v", ErrMalformed, f.Type, err)
	}
	return nil
}
