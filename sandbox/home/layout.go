package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// A long-lived sandbox lives in its directory under the data directory:
//
//	<data>/sandboxes/NAME/
//	  settings.json   how it is started (Settings); rewritten by a start with flags
//	  image/          the guest it was created on: hard links to the cache's files,
//	                  so that an image rebuild or `capsem image rm` never breaks it
//	  disk.ext4       the writable layer over the image's read-only root
//	  transfer.img    the disk files pass through (PUT and GET /v1/files), made at each start
//	  console.log     the guest's serial console
//	  supervisor.log  its supervisor's log (stdout and stderr)
//	  lock            flock'd by the running supervisor: held = running (lock.go)
//	  run.json        the running supervisor's launch record (Launch); left behind = crashed
//	  crash           why it crashed, when the supervisor saw it happen
//	  api.sock        the API's unix socket (SocketPathIn)
//	  store-copies/   copies of the running session's store for readers (POST /v1/store/copy)
//	  snapshots/TAG/  saved guests (snapshots.go)
//	  suspended/      the saved guest the next start resumes (snapshots.go)
//	  policy-asked.toml  what a person answered "always" when capsem asked
//	                  (policy.ParseOverlay), laid over the policy at every start
//
// The names are a contract: clients in other languages find the socket
// by them (sdk/python). The CLI reads these files; only the supervisor
// writes lock, run.json, crash and the socket.

// NameRule is what a sandbox name must match: it becomes a directory name
// and a hostname-like label.
var NameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckName says why name is not a sandbox name, or nil.
func CheckName(name string) error {
	if !NameRule.MatchString(name) {
		return fmt.Errorf("sandbox name %q: want 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

// Dir is one sandbox's directory and the paths in it. Name is not
// checked: CheckName is the caller's, before a name from a user becomes a
// path.
type Dir struct {
	Name string
	Dir  string
}

// New is sandbox name's directory under the data directory data.
func New(data, name string) Dir {
	return Dir{Name: name, Dir: filepath.Join(data, "sandboxes", name)}
}

func (d Dir) SettingsPath() string   { return filepath.Join(d.Dir, "settings.json") }
func (d Dir) ImageDir() string       { return filepath.Join(d.Dir, "image") }
func (d Dir) Disk() string           { return filepath.Join(d.Dir, "disk.ext4") }
func (d Dir) TransferDisk() string   { return filepath.Join(d.Dir, "transfer.img") }
func (d Dir) ConsoleLog() string     { return filepath.Join(d.Dir, "console.log") }
func (d Dir) Log() string            { return filepath.Join(d.Dir, "supervisor.log") }
func (d Dir) LockPath() string       { return filepath.Join(d.Dir, "lock") }
func (d Dir) LaunchPath() string     { return filepath.Join(d.Dir, "run.json") }
func (d Dir) CrashPath() string      { return filepath.Join(d.Dir, "crash") }
func (d Dir) StoreCopiesDir() string { return filepath.Join(d.Dir, "store-copies") }
func (d Dir) OverlayPath() string    { return filepath.Join(d.Dir, "policy-asked.toml") }

// SocketPath is where the sandbox's API listens (SocketPathIn).
func (d Dir) SocketPath() string { return SocketPathIn(d.Dir, d.Name) }

// Exists says whether the sandbox is complete: its settings are written
// last.
func (d Dir) Exists() bool {
	_, err := os.Stat(d.SettingsPath())
	return err == nil
}

// ClearCrash forgets a crash (the launch record left behind and the
// reason): the sandbox is stopped.
func (d Dir) ClearCrash() {
	_ = os.Remove(d.LaunchPath())
	_ = os.Remove(d.CrashPath())
}

// List is every complete sandbox under data, by name.
func List(data string) ([]Dir, error) {
	entries, err := os.ReadDir(filepath.Join(data, "sandboxes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Dir
	for _, e := range entries {
		if e.IsDir() && NameRule.MatchString(e.Name()) {
			if d := New(data, e.Name()); d.Exists() {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// WriteFileAtomic writes path through a temporary file and a rename, so
// that a reader sees the old file or the new one.
func WriteFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
