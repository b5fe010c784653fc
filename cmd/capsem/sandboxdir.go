package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/sandbox/api"
)

// A long-lived sandbox lives in its directory under the data directory:
//
//	<data>/sandboxes/NAME/
//	  settings.json   how it is started (settingsFile); rewritten by a start with flags
//	  image/          the guest it was created on: hard links to the cache's files,
//	                  so that an image rebuild or `capsem image rm` never breaks it
//	  disk.ext4       the writable layer over the image's read-only root
//	  transfer.img    the disk files pass through (PUT and GET /v1/files), made at each start
//	  console.log     the guest's serial console
//	  supervisor.log  its supervisor's log (stdout and stderr)
//	  lock            flock'd by the running supervisor: held = running
//	  run.json        the running supervisor's facts (runFile); left behind = crashed
//	  crash           why it crashed, when the supervisor saw it happen
//	  api.sock        the API's unix socket (see socketPath)
//	  snapshots/      copies of the running session's store for readers (POST /v1/snapshot)
//
// The CLI reads these files; only the supervisor writes lock, run.json,
// crash and the socket.

// sandboxNameRule is what a sandbox name must match: it becomes a
// directory name and a hostname-like label.
var sandboxNameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func checkSandboxName(name string) error {
	if !sandboxNameRule.MatchString(name) {
		return usageError{fmt.Errorf("sandbox name %q: want 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", name)}
	}
	return nil
}

// sandboxDir is one sandbox's directory and the paths in it.
type sandboxDir struct {
	Name string
	Dir  string
}

// sandboxArg is the sandbox a command's one argument names, under --data.
func sandboxArg(c *cli.Context) (sandboxDir, error) {
	if c.NArg() != 1 {
		return sandboxDir{}, usageError{fmt.Errorf("want one sandbox NAME, got %d arguments", c.NArg())}
	}
	name := c.Args().First()
	if err := checkSandboxName(name); err != nil {
		return sandboxDir{}, err
	}
	return newSandboxDir(dataOf(c), name), nil
}

func newSandboxDir(data, name string) sandboxDir {
	return sandboxDir{Name: name, Dir: filepath.Join(data, "sandboxes", name)}
}

func (d sandboxDir) settingsPath() string { return filepath.Join(d.Dir, "settings.json") }
func (d sandboxDir) imageDir() string     { return filepath.Join(d.Dir, "image") }
func (d sandboxDir) disk() string         { return filepath.Join(d.Dir, "disk.ext4") }
func (d sandboxDir) transferDisk() string { return filepath.Join(d.Dir, "transfer.img") }
func (d sandboxDir) consoleLog() string   { return filepath.Join(d.Dir, "console.log") }
func (d sandboxDir) log() string          { return filepath.Join(d.Dir, "supervisor.log") }
func (d sandboxDir) lockPath() string     { return filepath.Join(d.Dir, "lock") }
func (d sandboxDir) runPath() string      { return filepath.Join(d.Dir, "run.json") }
func (d sandboxDir) crashPath() string    { return filepath.Join(d.Dir, "crash") }
func (d sandboxDir) snapshotsDir() string { return filepath.Join(d.Dir, "snapshots") }

// socketPath is where the API listens (socketPathIn).
func (d sandboxDir) socketPath() string { return socketPathIn(d.Dir, d.Name) }

func (d sandboxDir) exists() bool {
	_, err := os.Stat(d.settingsPath())
	return err == nil
}

// settingsFile is settings.json. A sandbox's settings, as JSON; add
// fields, never rename or retype one (a newer capsem reads an older
// sandbox's file).
type settingsFile struct {
	Name      string    `json:"name"`
	Created   time.Time `json:"created"`
	Image     string    `json:"image"`     // the guest's id: its files are in image/
	Policy    string    `json:"policy"`    // absolute path of the policy file; "": the default policy
	Workspace string    `json:"workspace"` // absolute host directory shared as /workspace
	Env       []string  `json:"env"`       // K=V for every command, under each exec's --env
	Secrets   []string  `json:"secrets"`   // --secret NAME[@HOST,…] flags; the real values are never here
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskGiB   int       `json:"disk_gib"` // the writable disk's cap
}

func (d sandboxDir) readSettings() (settingsFile, error) {
	var s settingsFile
	b, err := os.ReadFile(d.settingsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("no sandbox %q in %s: capsem start %s creates it", d.Name, filepath.Dir(d.Dir), d.Name)
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w (remove the sandbox with capsem rm %s)", d.settingsPath(), err, d.Name)
	}
	return s, nil
}

func (d sandboxDir) writeSettings(s settingsFile) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(d.settingsPath(), append(b, '\n'), 0o600)
}

// writeFileAtomic writes path through a temporary file and a rename, so
// that a reader sees the old file or the new one.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// runFile is run.json: what the running supervisor writes when its guest
// is up, and removes when it stops cleanly.
type runFile struct {
	PID          int       `json:"pid"`
	Started      time.Time `json:"started"`
	SessionID    string    `json:"session_id"`
	PolicySHA256 string    `json:"policy_sha256"`
	Socket       string    `json:"socket"`
}

func (d sandboxDir) readRun() (runFile, bool) {
	var r runFile
	b, err := os.ReadFile(d.runPath())
	if err != nil || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, true
}

// locked says whether a supervisor holds the sandbox's lock.
func (d sandboxDir) locked() bool {
	f, err := os.Open(d.lockPath())
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// lock takes the sandbox's lock for a supervisor, for as long as the
// returned file stays open (the kernel drops it when the process dies,
// however it dies).
func (d sandboxDir) lock() (*os.File, error) {
	f, err := os.OpenFile(d.lockPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errAlreadyRunning{d.Name}
		}
		return nil, fmt.Errorf("lock %s: %w", d.lockPath(), err)
	}
	return f, nil
}

// awaitCrashedExit waits, at most max, while a supervisor that has
// recorded its guest's crash still holds the lock: it is on its way out
// (closing the store, removing its socket), and ls already shows the
// sandbox crashed, so a start right then must not be told it is running
// (TestSandboxForegroundAndGuestDeath met that window in a clean-clone
// run).
func (d sandboxDir) awaitCrashedExit(max time.Duration) {
	deadline := time.Now().Add(max)
	for d.locked() && time.Now().Before(deadline) {
		if b, err := os.ReadFile(d.crashPath()); err != nil || len(b) == 0 {
			return // running, not crashed
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type errAlreadyRunning struct{ name string }

func (e errAlreadyRunning) Error() string {
	return fmt.Sprintf("sandbox %q is already running (capsem exec %s -- CMD runs a command in it; capsem stop %s stops it)", e.name, e.name, e.name)
}

// status is the sandbox as `capsem ls` shows it, from its files.
func (d sandboxDir) status() (api.Status, error) {
	s, err := d.readSettings()
	if err != nil {
		return api.Status{}, err
	}
	st := api.Status{
		Name: d.Name, Created: s.Created, Policy: s.Policy, Workspace: s.Workspace,
		CPUs: s.CPUs, MemoryMiB: s.MemoryMiB, DiskSize: int64(s.DiskGiB) << 30, Image: s.Image, Log: d.log(),
		Socket: d.socketPath(),
	}
	if used, size, err := image.DiskUsage(d.disk()); err == nil {
		st.DiskUsed, st.DiskSize = used, size
	}
	run, hasRun := d.readRun()
	switch {
	case d.locked():
		st.State = api.StateRunning
	case hasRun:
		st.State = api.StateCrashed
		st.Crash = "its supervisor died without stopping it"
	default:
		st.State = api.StateStopped
	}
	if b, err := os.ReadFile(d.crashPath()); err == nil && len(b) > 0 {
		st.State, st.Crash = api.StateCrashed, string(b)
	}
	if hasRun {
		st.Started, st.SessionID, st.PolicySHA256 = run.Started, run.SessionID, run.PolicySHA256
		if st.State == api.StateRunning {
			st.PID = run.PID
		}
	}
	if st.PolicySHA256 == "" {
		st.PolicySHA256 = policyFileSHA(s.Policy)
	}
	return st, nil
}

// policyFileSHA is the sha256 of a policy file as the policy package
// computes it ("" when it cannot be read).
func policyFileSHA(path string) string {
	p, err := loadPolicy(path)
	if err != nil {
		return ""
	}
	return p.SHA256
}

// pinImage links the guest's files into the sandbox's image directory, so
// that the sandbox keeps using them whatever happens to the cache. Hard
// links cost no space; across filesystems the files are copied.
func (d sandboxDir) pinImage(g *image.Guest) error {
	dir := d.imageDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct{ src, name string }{{g.Kernel, "vmlinux"}, {g.Initramfs, "initramfs"}, {g.Rootfs, "rootfs.erofs"}} {
		dst := filepath.Join(dir, f.name)
		_ = os.Remove(dst)
		if err := os.Link(f.src, dst); err != nil {
			if err := copyFile(f.src, dst); err != nil {
				return fmt.Errorf("keep the guest image for sandbox %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// guest is the sandbox's pinned image.
func (d sandboxDir) guest(s settingsFile) *image.Guest {
	dir := d.imageDir()
	return &image.Guest{ID: s.Image, Kernel: filepath.Join(dir, "vmlinux"), Initramfs: filepath.Join(dir, "initramfs"), Rootfs: filepath.Join(dir, "rootfs.erofs")}
}

func copyFile(src, dst string) error {
	b, err := os.Open(src)
	if err != nil {
		return err
	}
	defer b.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(b); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

// listSandboxes is every sandbox under data, by name.
func listSandboxes(data string) ([]sandboxDir, error) {
	entries, err := os.ReadDir(filepath.Join(data, "sandboxes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []sandboxDir
	for _, e := range entries {
		if e.IsDir() && sandboxNameRule.MatchString(e.Name()) {
			if d := newSandboxDir(data, e.Name()); d.exists() {
				out = append(out, d)
			}
		}
	}
	return out, nil
}
