package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

type pendingEvent struct {
	action   string
	oldPath  string
	dir      bool
	seen     time.Time
	mayExist bool // created by a move into the tree: it may have replaced a file
}

// record adds an event to the pending set, coalescing with what is there
// where nothing is lost: writes after a create or a write, a create after a
// file's deletion (the file was replaced: modified), a deletion of what was
// created within the delay (nothing happened, unless it came by a move that
// may have replaced a file). Anything else emits what is pending first, so
// the order of events stays the order of changes.
func (w *Watcher) record(action, rel, old string, isDir bool) {
	now := time.Now()
	prev := w.pending[rel]
	switch {
	case prev == nil:
	case action == proto.ActionCreated && prev.action == proto.ActionCreated && prev.dir == isDir:
		return // found twice: by a scan and by its event
	case action == proto.ActionCreated && prev.action == proto.ActionDeleted && !prev.dir && !isDir:
		prev.action = proto.ActionModified // replaced
		return
	case action == proto.ActionModified && prev.action != proto.ActionDeleted && !prev.dir:
		return // created, modified or renamed already says it
	case action == proto.ActionDeleted && prev.action == proto.ActionCreated && !prev.mayExist && w.dropCreated(rel):
		return // came and went within the delay, with everything in it
	case action == proto.ActionDeleted && prev.action == proto.ActionCreated:
		prev.action = proto.ActionDeleted // it may have replaced something the host knew
		return
	case action == proto.ActionDeleted && prev.action == proto.ActionModified:
		prev.action = proto.ActionDeleted
		return
	case action == proto.ActionDeleted && prev.action == proto.ActionDeleted:
		return
	default:
		w.flushAll()
	}
	if len(w.pending) == 0 {
		w.first = now
	}
	if !slices.Contains(w.order, rel) {
		w.order = append(w.order, rel)
	}
	w.pending[rel] = &pendingEvent{action: action, oldPath: old, dir: isDir, seen: now}
}

// dropCreated forgets the pending creation of rel and of everything
// pending under it, if all of that is creations (new to the host), and
// reports whether it did.
func (w *Watcher) dropCreated(rel string) bool {
	var under []string
	for p, e := range w.pending {
		if strings.HasPrefix(p, rel+"/") {
			if e.action != proto.ActionCreated || e.mayExist {
				return false
			}
			under = append(under, p)
		}
	}
	for _, p := range under {
		delete(w.pending, p)
	}
	delete(w.pending, rel)
	return true
}

// flushAll emits every pending event, in first-seen order (a rename still
// being put together is settled first).
func (w *Watcher) flushAll() {
	if m := w.move; m != nil {
		w.move = nil
		w.finishMove(m, 0, false)
	}
	order := w.order
	w.order = nil
	for _, p := range order {
		e, ok := w.pending[p]
		if !ok {
			continue
		}
		delete(w.pending, p)
		ev := proto.FileEvent{Action: e.action, Path: p, OldPath: e.oldPath, Dir: e.dir, Time: e.seen.UnixNano()}
		if e.action != proto.ActionDeleted && !e.dir {
			if st, err := os.Lstat(filepath.Join(w.root, filepath.FromSlash(p))); err == nil && st.Mode().IsRegular() {
				ev.Size = st.Size()
			}
		}
		if watchTrace != nil {
			watchTrace("EMIT %s %s (from %q)", ev.Action, ev.Path, ev.OldPath)
		}
		w.emit(ev)
	}
	w.pending = map[string]*pendingEvent{}
}
