package api

import (
	"fmt"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

// The API's paths (docs/API.md).
const (
	PathSandbox      = "/v1/sandbox"       // GET: Status
	PathExec         = "/v1/exec"          // POST ExecRequest, upgraded to ExecProtocol: frames
	PathPolicyReload = "/v1/policy/reload" // POST: Reload
	PathStop         = "/v1/stop"          // POST: the guest powers off, the supervisor exits
	PathEvents       = "/v1/events"        // GET ?since=SEQ&follow=1: the session's events as NDJSON
	PathFiles        = "/v1/files"         // PUT, GET ?path=P: a file into or out of the guest
	PathStoreCopy    = "/v1/store/copy"    // POST: StoreCopy, a read-only copy of the event store
	// PathStoreCopyOld is PathStoreCopy's first name, still answered:
	// clients from before VM snapshots (PathSnapshots) use it.
	PathStoreCopyOld = "/v1/snapshot"
	// PathSnapshots saves the guest (POST SnapshotRequest: Snapshot),
	// lists its snapshots (GET: []Snapshot) and removes one (DELETE
	// ?tag=TAG).
	PathSnapshots = "/v1/snapshots"
	// PathSuspend saves the guest and stops the sandbox (POST:
	// Snapshot); the next start resumes it.
	PathSuspend = "/v1/suspend"
	// PathPorts lists the published ports (GET: []Port), publishes one
	// (POST PortRequest: Port) and unpublishes one (DELETE ?spec=SPEC).
	PathPorts = "/v1/ports"
	// PathAsks lists the questions the guest's unforeseen names, ports
	// and tools wait on (GET; ?follow=1: a stream of ask.Update, and while
	// one is open the sandbox asks rather than denies); POST PathAsks/ID
	// answers one (ask.Answer).
	PathAsks = "/v1/asks"
)

// ExecProtocol is the Upgrade token of a streamed exec.
const ExecProtocol = "capsem-exec"

// The states a sandbox is in.
const (
	StateRunning = "running" // its supervisor holds the lock and its guest answers
	StateStopped = "stopped" // no supervisor; the disk and settings are kept
	StateCrashed = "crashed" // its supervisor or guest died without a stop
	// StateSuspended: no supervisor; the guest's memory and devices are
	// saved, and the next start resumes its processes.
	StateSuspended = "suspended"
)

// Status is a sandbox as GET /v1/sandbox and `capsem ls --json` show it.
type Status struct {
	Name         string    `json:"name"`
	State        string    `json:"state"`
	Created      time.Time `json:"created"`
	Started      time.Time `json:"started,omitzero"` // the last start, zero if never
	Policy       string    `json:"policy"`           // the policy file ("": the default policy)
	PolicySHA256 string    `json:"policy_sha256"`    // of the policy in force (running) or of the file (stopped)
	Workspace    string    `json:"workspace"`        // the host directory shared as /workspace
	CPUs         int       `json:"cpus"`
	MemoryMiB    int       `json:"memory_mib"`
	DiskUsed     int64     `json:"disk_used"` // bytes the writable disk takes on the host
	DiskSize     int64     `json:"disk_size"` // its cap in bytes
	SessionID    string    `json:"session_id,omitempty"`
	Image        string    `json:"image"`
	Arch         string    `json:"arch"`          // the image's architecture: amd64, arm64
	PID          int       `json:"pid,omitempty"` // the supervisor's, while running
	Log          string    `json:"log"`           // the supervisor's log
	Socket       string    `json:"socket"`        // the API's unix socket (while running)
	Crash        string    `json:"crash,omitempty"`
	// SnapshotBytes is what its snapshots and suspended state take on
	// the host, beside DiskUsed.
	SnapshotBytes int64 `json:"snapshot_bytes,omitempty"`
	// Ports are its published ports: those in force while it runs, else
	// those its next start publishes.
	Ports []Port `json:"ports,omitempty"`
	// Asked is what a person answered "always" when the sandbox asked:
	// its overlay's entries (policy-asked.toml in its directory), laid
	// over its policy at every start.
	Asked []string `json:"asked,omitempty"`
}

// SnapshotRequest is POST /v1/snapshots' body.
type SnapshotRequest struct {
	Tag string `json:"tag,omitempty"` // default: the time, 20261127-195700
}

// Snapshot is one saved guest: its record (meta.json in its directory),
// GET /v1/snapshots' items. Stability: read back by every later capsem
// that restores it; fields are added, never renamed.
type Snapshot struct {
	Tag       string    `json:"tag"`
	Sandbox   string    `json:"sandbox"`    // the sandbox it was taken of
	SessionID string    `json:"session_id"` // the session it was taken in
	Created   time.Time `json:"created"`
	Bytes     int64     `json:"bytes"`     // what its files take on the host
	PausedMS  float64   `json:"paused_ms"` // how long the guest's vCPUs were stopped for it
	// Disk says the snapshot holds the data disk as it was (a snapshot);
	// false: it restores onto the sandbox's own (a suspend).
	Disk bool `json:"disk"`
	// What a restore must match: the guest image, the capsem that saved
	// it, and the VM (the hypervisor's machine: version, accelerator,
	// CPUs, memory, devices).
	Image     string `json:"image"`
	Capsem    string `json:"capsem"`
	Machine   string `json:"machine"`
	CPUs      int    `json:"cpus"`
	MemoryMiB int    `json:"memory_mib"`
	// Placeholders are the secrets' placeholders the guest's memory
	// holds (name → placeholder, never a real value): a restore binds
	// the same ones.
	Placeholders map[string]string `json:"placeholders,omitempty"`
	// Origin is, for a fork's pending restore, "snapshot SANDBOX@TAG of
	// session ID".
	Origin string `json:"origin,omitempty"`
	// The agent's handshake at boot, which a restored guest does not
	// repeat.
	Agent proto.Hello `json:"agent"`
	Ready proto.Ready `json:"ready"`
}

// ExecRequest starts a command (POST /v1/exec). Argv empty starts the
// guest's interactive login shell.
type ExecRequest struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"`     // "K=V": the command's environment on top of the guest's base
	Workdir string   `json:"workdir,omitempty"` // default: /workspace
	TTY     bool     `json:"tty,omitempty"`     // a pty: all output on stdout
	Rows    uint16   `json:"rows,omitempty"`
	Cols    uint16   `json:"cols,omitempty"`
	// TimeoutMS kills the command after this many milliseconds; its Exit
	// then has code 124 and timed_out. 0: no timeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// Exit ends a streamed exec: the last frame.
type Exit struct {
	Code     int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`    // the signal that killed it ("KILL"), if one did
	TimedOut bool   `json:"timed_out,omitempty"` // killed after timeout_ms; Code is 124
	// Error says why the command did not run or did not end normally
	// (Code then is the shell's: 127 not found, 126 not executable, or -1).
	Error string `json:"error,omitempty"`
}

// ExitTimeout is the exit code of a command killed after its timeout, as
// timeout(1) gives.
const ExitTimeout = 124

// Reload is the answer to POST /v1/policy/reload.
type Reload struct {
	Policy string `json:"policy"`
	SHA256 string `json:"sha256"`
}

// StoreCopy is the answer to POST /v1/store/copy: a consistent copy of the
// supervisor's event store (the running session's events so far), for
// store.OpenReadOnly. The caller removes it when done.
type StoreCopy struct {
	Dir       string `json:"dir"`
	SessionID string `json:"session_id"`
}

// ErrorBody is every error response's body.
type ErrorBody struct {
	Error string `json:"error"`
}

// Error is an error response, as the client returns it.
type Error struct {
	Status  int    // the HTTP status
	Message string // what the server said, which says what to do
}

func (e *Error) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }
