package agent

import (
	"errors"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// InitialScanBudget is how long NewWatcher may spend watching the existing
// tree before it returns. On 9p under emulation a directory costs ~15 ms
// (measured: 2,000 directories took 33 s), so a large workspace is watched
// in the background, between events, and the session starts meanwhile;
// the watcher then reports an overflow on "." when it is done (or closed
// before), since changes made in directories it had not reached went
// unseen.
var InitialScanBudget = 300 * time.Millisecond

// drainBacklog lists backlog directories, breadth first, until it is empty
// or deadline passes.
func (w *Watcher) drainBacklog(deadline time.Time) {
	for len(w.backlog) > 0 && time.Now().Before(deadline) {
		wd := w.backlog[0]
		w.backlog = w.backlog[1:]
		if rel, ok := w.path(wd); ok {
			w.scan(wd, rel, scanQuiet)
		}
	}
	if len(w.backlog) == 0 {
		w.backlog = nil
	}
}

// scanIncomplete reports that events may be missing because the initial
// scan was not done in time.
func (w *Watcher) scanIncomplete() {
	w.partial = false
	w.flushAll()
	w.emit(proto.FileEvent{Action: proto.ActionOverflow, Path: ".", Time: time.Now().UnixNano()})
}

// Scan modes.
const (
	scanQuiet = iota // watch, report nothing (the tree the host already has)
	scanAll          // watch, report everything (new to the host)
)

// addDir watches the directory called name in watched directory parent
// (opened through the parent's pin, wherever the parent is now) and scans
// it; rel is the path it is reported under.
func (w *Watcher) addDir(parent int32, name, rel string, mode int) {
	p, ok := w.dirs[parent]
	if !ok {
		return
	}
	pin, err := unix.Openat(p.pin, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return // gone already, or not a directory (any more)
	}
	wd, err := w.watchPin(pin)
	if err != nil {
		unix.Close(pin)
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			w.emit(proto.FileEvent{Action: proto.ActionOverflow, Path: rel, Time: time.Now().UnixNano()})
		}
		return
	}
	if d, known := w.dirs[wd]; known {
		unix.Close(pin)
		if d.parent != parent || d.name != name {
			// Watched already, under another name: the queued events will
			// say how it got here, unless its rename went into a directory
			// not watched yet (then finishMove uses this). If its new
			// parent is new to the host, so is what is in it.
			w.alias[wd] = dirLoc{parent, name}
			w.suspect = true
			if watchTrace != nil {
				watchTrace("ALIAS wd=%d at parent=%d name=%q (known as parent=%d name=%q)", wd, parent, name, d.parent, d.name)
			}
			if mode == scanAll {
				w.scan(wd, rel, scanAll)
			}
		}
		return
	}
	w.dirs[wd] = &watchedDir{parent: parent, name: name, pin: pin}
	if watchTrace != nil {
		watchTrace("ADD wd=%d parent=%d name=%q rel=%q", wd, parent, name, rel)
	}
	if mode == scanQuiet {
		w.backlog = append(w.backlog, wd) // listed by drainBacklog
		return
	}
	w.scan(wd, rel, mode)
}

// scan lists watched directory wd (reported as rel), watching the
// directories in it and, with scanAll, reporting everything as created.
func (w *Watcher) scan(wd int32, rel string, mode int) {
	d, ok := w.dirs[wd]
	if !ok {
		return
	}
	fd, err := unix.Openat(d.pin, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), rel)
	entries, _ := f.ReadDir(-1)
	f.Close()
	for _, e := range entries {
		child := path.Join(rel, e.Name())
		if mode == scanAll {
			w.record(proto.ActionCreated, child, "", e.IsDir())
		}
		if e.IsDir() { // DirEntry.IsDir does not follow symlinks
			w.addDir(wd, e.Name(), child, mode)
		}
	}
}
