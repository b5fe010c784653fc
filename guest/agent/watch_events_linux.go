package agent

import (
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// moveState is a rename being put together: MOVED_FROM, MOVED_TO, then
// MOVE_SELF for a watched directory.
type moveState struct {
	from   string // where it left, relative to root ("" when it came from outside)
	left   bool   // a MOVED_FROM was seen
	cookie uint32
	to     dirLoc // where it arrived
	toPath string
	paired bool // a MOVED_TO was seen
	dir    bool
}

func (w *Watcher) handle(wd int32, mask, cookie uint32, name string) {
	if watchTrace != nil {
		p, _ := w.path(wd)
		watchTrace("RAW wd=%d(%q) mask=%#x cookie=%d name=%q", wd, p, mask, cookie, name)
	}
	if mask&unix.IN_IGNORED != 0 {
		// A watch went away. The kernel queues this whenever it gets to
		// destroying the watch (deferred), so it can fall between the
		// halves of a rename: it neither belongs to one nor ends one.
		w.forget(wd)
		return
	}
	if m := w.move; m != nil {
		switch {
		case mask&unix.IN_MOVED_TO != 0 && m.left && !m.paired && cookie == m.cookie:
			// its other half, handled below
		case mask&unix.IN_MOVE_SELF != 0:
			w.move = nil
			w.finishMove(m, wd, true)
			return
		default:
			w.move = nil
			w.finishMove(m, 0, false)
		}
	}
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.flushAll()
		w.emit(proto.FileEvent{Action: proto.ActionOverflow, Path: ".", Time: time.Now().UnixNano()})
		return
	}
	if mask&unix.IN_MOVE_SELF != 0 {
		w.suspect = true // a directory moved without a rename we could follow
		return
	}
	if mask&unix.IN_DELETE_SELF != 0 || name == "" {
		return // about a directory itself
	}
	dir, ok := w.path(wd)
	if !ok {
		return
	}
	rel := path.Join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&unix.IN_CREATE != 0:
		w.record(proto.ActionCreated, rel, "", isDir)
		if isDir {
			w.addDir(wd, name, rel, scanAll)
		}
	case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
		if !isDir {
			w.record(proto.ActionModified, rel, "", false)
		}
	case mask&unix.IN_DELETE != 0:
		w.record(proto.ActionDeleted, rel, "", isDir)
		if isDir {
			w.forgetRemoved(dirLoc{wd, name})
		}
	case mask&unix.IN_MOVED_FROM != 0:
		w.move = &moveState{from: rel, left: true, cookie: cookie, dir: isDir}
		w.startTimer()
	case mask&unix.IN_MOVED_TO != 0:
		m := w.move
		if m == nil || !m.left || m.paired || m.cookie != cookie {
			m = &moveState{dir: isDir} // came from outside the tree
		}
		m.paired = true
		m.to, m.toPath = dirLoc{wd, name}, rel
		if isDir {
			w.move = m // a MOVE_SELF may follow
			w.startTimer()
		} else {
			w.move = nil // files have no watch of their own
			w.finishMove(m, 0, false)
		}
	}
}

func (w *Watcher) startTimer() {
	if len(w.pending) == 0 {
		w.first = time.Now()
	}
}

// finishMove records a rename once all its halves are in; self tells
// whether the kernel named the moved directory's own watch (wd).
func (w *Watcher) finishMove(m *moveState, wd int32, self bool) {
	switch {
	case m.left && m.paired: // within the tree
		w.renamed(m.from, m.toPath, m.dir)
		if m.dir {
			if self {
				w.relink(wd, m.to)
			} else {
				w.addDir(m.to.parent, m.to.name, m.toPath, scanAll) // never watched: watch it where it is
			}
		}
	case m.left: // left the tree, or went into a directory not watched yet
		w.record(proto.ActionDeleted, m.from, "", m.dir)
		if m.dir && self {
			if loc, ok := w.alias[wd]; ok && w.inTree(wd) {
				w.relink(wd, loc) // a scan found it there, and reported it
				delete(w.alias, wd)
			} else {
				w.dropTree(wd) // keeps it, for reconcile, if it is still inside
			}
		}
	case m.paired: // came in from outside, maybe over a file
		w.record(proto.ActionCreated, m.toPath, "", m.dir)
		if e := w.pending[m.toPath]; e != nil && e.action == proto.ActionCreated {
			e.mayExist = true
		}
		if m.dir {
			if self && w.dirs[wd] != nil {
				w.relink(wd, m.to)
				w.scan(wd, m.toPath, scanAll)
			} else {
				w.addDir(m.to.parent, m.to.name, m.toPath, scanAll)
			}
		}
	}
}

// renamed records a rename within the tree. Events pending under a
// renamed directory, or for either name, are emitted first, under the
// names they happened to: coalescing across a rename would rewrite history
// (and inotify does not say whether the rename replaced a file).
func (w *Watcher) renamed(old, rel string, isDir bool) {
	if isDir || w.pending[old] != nil || w.pending[rel] != nil {
		w.flushAll()
	}
	w.record(proto.ActionRenamed, rel, old, isDir)
}
