package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

type watchedDir struct {
	parent int32 // -1 for the root
	name   string
	pin    int // O_PATH descriptor
}

type dirLoc struct {
	parent int32
	name   string
}

// path is watch wd's directory relative to root.
func (w *Watcher) path(wd int32) (string, bool) {
	var parts []string
	for i := 0; i < 4096; i++ {
		d, ok := w.dirs[wd]
		if !ok {
			return "", false
		}
		if d.parent < 0 {
			for l, r := 0, len(parts)-1; l < r; l, r = l+1, r-1 {
				parts[l], parts[r] = parts[r], parts[l]
			}
			return strings.Join(parts, "/"), true
		}
		parts = append(parts, d.name)
		wd = d.parent
	}
	return "", false
}

// relink moves watch wd's directory (and so its subtree) to loc, dropping
// a directory it replaced there.
func (w *Watcher) relink(wd int32, loc dirLoc) {
	d := w.dirs[wd]
	if d == nil || w.dirs[loc.parent] == nil || w.isUnder(loc.parent, wd) {
		return
	}
	w.forgetRemoved(loc)
	if watchTrace != nil {
		watchTrace("RELINK wd=%d to parent=%d name=%q", wd, loc.parent, loc.name)
	}
	d.parent, d.name = loc.parent, loc.name
	// An alias stays: it comes from a scan, later than any event queued
	// before it, so it is newer than this rename.
}

// reconcile checks, when something suspicious happened, that every watch
// is linked where its directory is. It runs with the kernel's queue
// drained, so the tree as it is now is the truth. A watch found elsewhere
// is relinked (or dropped, if it left the tree), and an overflow event tells
// the host that the file events of this stretch may be inexact.
func (w *Watcher) reconcile() {
	if !w.suspect {
		return
	}
	w.suspect = false
	root, _ := filepath.Abs(w.root)
	fixed := false
	for pass := 0; pass < 8; pass++ {
		changed := false
		for wd, d := range w.dirs {
			if d.parent < 0 {
				continue
			}
			cur, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(d.pin))
			if err != nil {
				continue
			}
			have, ok := w.path(wd)
			if ok && cur == filepath.Join(root, filepath.FromSlash(have)) {
				continue
			}
			changed, fixed = true, true
			rel, err := filepath.Rel(root, cur)
			if err != nil || strings.HasPrefix(rel, "..") || strings.HasSuffix(cur, " (deleted)") {
				_, _ = unix.InotifyRmWatch(w.ino, uint32(wd))
				w.forget(wd)
				break // the map changed under the loop
			}
			parent, ok := w.dirAt(filepath.Dir(cur))
			if !ok {
				// Its parent is not watched: watch the parent's chain from the
				// nearest watched ancestor down, then come back to it.
				w.watchPath(rel)
				break
			}
			w.relink(wd, dirLoc{parent, filepath.Base(cur)})
			break
		}
		if !changed {
			break
		}
	}
	for wd := range w.alias {
		delete(w.alias, wd)
	}
	if fixed {
		w.emit(proto.FileEvent{Action: proto.ActionOverflow, Path: ".", Time: time.Now().UnixNano()})
	}
}

// watchPath makes sure every directory on rel (relative to root) is
// watched, adding watches (and reporting their contents) from the nearest
// watched ancestor down.
func (w *Watcher) watchPath(rel string) {
	root, _ := filepath.Abs(w.root)
	parts := strings.Split(filepath.ToSlash(rel), "/")
	parent, ok := w.dirAt(root)
	if !ok {
		return
	}
	for i, name := range parts {
		next, ok := w.dirAt(filepath.Join(root, filepath.FromSlash(strings.Join(parts[:i+1], "/"))))
		if !ok {
			w.addDir(parent, name, strings.Join(parts[:i+1], "/"), scanAll)
			if next, ok = w.dirAt(filepath.Join(root, filepath.FromSlash(strings.Join(parts[:i+1], "/")))); !ok {
				return
			}
		}
		parent = next
	}
}

// dirAt finds the watch on the directory at absolute path p.
func (w *Watcher) dirAt(p string) (int32, bool) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0, false
	}
	for wd, d := range w.dirs {
		var ps unix.Stat_t
		if unix.Fstat(d.pin, &ps) == nil && ps.Dev == st.Dev && ps.Ino == st.Ino {
			return wd, true
		}
	}
	return 0, false
}

// inTree reports whether watch wd's directory is inside the watched root
// now (its pin's path, as the kernel knows it).
func (w *Watcher) inTree(wd int32) bool {
	d, ok := w.dirs[wd]
	if !ok {
		return false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(d.pin))
	if err != nil {
		return true // cannot tell: keep it
	}
	root, _ := filepath.Abs(w.root)
	return strings.HasPrefix(p, root+"/") && !strings.HasSuffix(p, " (deleted)")
}

// isUnder reports whether watch a is b or inside it.
func (w *Watcher) isUnder(a, b int32) bool {
	for i := 0; i < 4096; i++ {
		if a == b {
			return true
		}
		d, ok := w.dirs[a]
		if !ok || d.parent < 0 {
			return false
		}
		a = d.parent
	}
	return false
}

// forgetRemoved forgets the watched directories at loc that no longer
// exist (removed, or replaced by a rename): closing the pin lets the kernel
// drop the inode and its watch.
func (w *Watcher) forgetRemoved(loc dirLoc) {
	for wd, d := range w.dirs {
		if d.parent != loc.parent || d.name != loc.name {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(d.pin, &st) == nil && st.Nlink == 0 {
			w.forget(wd)
		}
	}
}

// forget drops watch wd's bookkeeping (its watch is gone or going).
func (w *Watcher) forget(wd int32) {
	if d, ok := w.dirs[wd]; ok {
		unix.Close(d.pin)
		delete(w.dirs, wd)
	}
	delete(w.alias, wd)
}

// dropTree removes the watches of wd's directory and everything under it
// (it left the tree).
//
// Only directories that really left are dropped: one still inside the
// tree was linked wrongly (a race), is kept, and reconcile relinks it.
func (w *Watcher) dropTree(wd int32) {
	var gone []int32
	for x := range w.dirs {
		if !w.isUnder(x, wd) {
			continue
		}
		if w.inTree(x) {
			w.suspect = true
			continue
		}
		gone = append(gone, x) // after the walk: isUnder needs the links
	}
	for _, x := range gone {
		_, _ = unix.InotifyRmWatch(w.ino, uint32(x))
		w.forget(x)
	}
}
