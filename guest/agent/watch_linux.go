package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// Watcher reports changes under a directory tree as proto.FileEvents, using
// inotify.
//
// Every directory gets a watch and is pinned with an O_PATH descriptor. On
// 9p without a cache (QEMU's workspace) an unused dentry is dropped at once
// and the next lookup makes a new inode, which a watch on the old one never
// hears about; a pinned dentry keeps one inode for every lookup. The pins
// also let the watcher open a new directory relative to its parent's inode
// rather than by a path that may have changed since the event.
//
// Watched directories form a tree keyed by watch descriptor (parent, name):
// paths are derived, so a rename moves one node and its subtree follows. The
// kernel queues a rename as MOVED_FROM and MOVED_TO (paired by cookie) and,
// when the directory itself is watched, MOVE_SELF on its watch — which says
// exactly which directory moved, or by its absence that it was never
// watched (it was renamed before its watch could be added: then it is
// watched and scanned where it arrived).
//
// New directories are scanned when their watch is added: what was created
// in them before is reported created. A scan sees the tree as it is now
// while queued events tell how it was; a scan therefore never moves a
// directory it already watches, it only notes where it found it, for a
// rename whose other half never comes (into a directory not watched yet).
//
// Bursts are coalesced within the delay (record): the writes of a file
// become one "modified", a file created and deleted is not reported.
// Whatever would lose information — a rename, a type change — emits what is
// pending first. Replaying the events on the tree as it was gives the tree
// as it is (TestWatchReplayMatchesTree).
//
// inotify sees what is done through this kernel: on a 9p or virtiofs
// workspace that is everything the guest's commands do, which is what the
// store wants.
type Watcher struct {
	root  string
	delay time.Duration
	emit  func(proto.FileEvent)
	ino   int
	wakeR int
	wakeW int

	// owned by the loop goroutine
	dirs    map[int32]*watchedDir
	alias   map[int32]dirLoc // where a scan found a watched directory under another name
	move    *moveState       // a rename whose later halves may still come
	suspect bool             // something happened that reconcile should check
	pending map[string]*pendingEvent
	order   []string  // pending paths in first-seen order
	first   time.Time // when the oldest pending event was seen
	// backlog are directories of the tree the host already has that are
	// watched but not listed yet (the initial scan, done in slices so a
	// big workspace does not hold up the agent); partial says the scan
	// outlived InitialScanBudget, so changes made meanwhile in directories
	// not reached yet went unseen.
	backlog []int32
	partial bool

	reqMu   sync.Mutex
	reqs    []watchReq
	stopped bool
	done    chan struct{}
}

type watchedDir struct {
	parent int32 // -1 for the root
	name   string
	pin    int // O_PATH descriptor
}

type dirLoc struct {
	parent int32
	name   string
}

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

type watchReq struct {
	done chan struct{}
	emit bool // flush pending events too (else only read the kernel's queue)
}

type pendingEvent struct {
	action   string
	oldPath  string
	dir      bool
	seen     time.Time
	mayExist bool // created by a move into the tree: it may have replaced a file
}

// watchTrace, when set (tests), sees every raw event and every emitted one.
var watchTrace func(format string, args ...any)

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// NewWatcher starts watching root recursively. emit is called from the
// watcher's goroutine, in order; it may block (the kernel queues meanwhile,
// and reports an overflow if its queue fills).
func NewWatcher(root string, delay time.Duration, emit func(proto.FileEvent)) (*Watcher, error) {
	pin, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		unix.Close(pin)
		return nil, fmt.Errorf("inotify: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(pin)
		unix.Close(ino)
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &Watcher{
		root: root, delay: delay, emit: emit, ino: ino, wakeR: p[0], wakeW: p[1],
		dirs: map[int32]*watchedDir{}, alias: map[int32]dirLoc{}, pending: map[string]*pendingEvent{},
		done: make(chan struct{}),
	}
	wd, err := w.watchPin(pin)
	if err != nil {
		unix.Close(pin)
		w.closeFDs()
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w.dirs[wd] = &watchedDir{parent: -1, pin: pin}
	w.backlog = []int32{wd}
	w.drainBacklog(time.Now().Add(InitialScanBudget))
	w.partial = len(w.backlog) > 0
	go w.loop()
	return w, nil
}

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

// watchPin adds a watch on the directory pinned by pin, through
// /proc/self/fd so that it is exactly that inode.
func (w *Watcher) watchPin(pin int) (int32, error) {
	wd, err := unix.InotifyAddWatch(w.ino, "/proc/self/fd/"+strconv.Itoa(pin), watchMask)
	return int32(wd), err
}

// Flush reports every change made before it was called, then returns.
func (w *Watcher) Flush() { w.request(true) }

// settle makes the watcher handle everything the kernel has queued, without
// emitting (for tests that need a deterministic interleaving).
func (w *Watcher) settle() { w.request(false) }

func (w *Watcher) request(emit bool) {
	ch := make(chan struct{})
	w.reqMu.Lock()
	if w.stopped {
		w.reqMu.Unlock()
		return
	}
	w.reqs = append(w.reqs, watchReq{done: ch, emit: emit})
	w.reqMu.Unlock()
	w.wake()
	select {
	case <-ch:
	case <-w.done:
	}
}

// Close stops the watcher; pending events are dropped.
func (w *Watcher) Close() error {
	w.reqMu.Lock()
	already := w.stopped
	w.stopped = true
	w.reqMu.Unlock()
	if !already {
		w.wake()
	}
	<-w.done
	return nil
}

func (w *Watcher) wake() { _, _ = unix.Write(w.wakeW, []byte{1}) }

func (w *Watcher) closeFDs() {
	for wd, d := range w.dirs {
		unix.Close(d.pin)
		delete(w.dirs, wd)
	}
	unix.Close(w.ino)
	unix.Close(w.wakeR)
	unix.Close(w.wakeW)
}

func (w *Watcher) loop() {
	defer close(w.done)
	defer w.closeFDs()
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.ino), Events: unix.POLLIN}, {Fd: int32(w.wakeR), Events: unix.POLLIN}}
	for {
		timeout := -1
		if len(w.backlog) > 0 {
			timeout = 0 // list a slice of the backlog after the events
		} else if len(w.pending) > 0 || w.move != nil {
			timeout = int(time.Until(w.first.Add(w.delay)) / time.Millisecond)
			if timeout < 0 {
				timeout = 0
			}
		}
		_, err := unix.Poll(fds, timeout)
		if err != nil && err != unix.EINTR {
			return
		}
		w.readEvents(buf)
		if fds[1].Revents != 0 {
			var b [64]byte
			for {
				if n, _ := unix.Read(w.wakeR, b[:]); n <= 0 {
					break
				}
			}
			w.reqMu.Lock()
			reqs, stopped := w.reqs, w.stopped
			w.reqs = nil
			w.reqMu.Unlock()
			if stopped {
				if w.partial {
					w.scanIncomplete()
				}
				for _, r := range reqs {
					close(r.done)
				}
				return
			}
			if len(reqs) > 0 {
				w.readEvents(buf) // everything queued before the request
				for _, r := range reqs {
					if r.emit {
						w.flushAll()
						w.reconcile()
						break
					}
				}
				for _, r := range reqs {
					close(r.done)
				}
			}
		}
		if (len(w.pending) > 0 || w.move != nil) && !time.Now().Before(w.first.Add(w.delay)) {
			w.flushAll()
		}
		if len(w.backlog) > 0 {
			w.drainBacklog(time.Now().Add(5 * time.Millisecond))
			if len(w.backlog) == 0 && w.partial {
				w.scanIncomplete()
			}
		}
	}
}

// readEvents reads and handles everything the kernel has queued.
func (w *Watcher) readEvents(buf []byte) {
	for {
		n, err := unix.Read(w.ino, buf)
		if n <= 0 || err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := unix.ByteSliceToString(buf[off+unix.SizeofInotifyEvent : end])
			w.handle(ev.Wd, ev.Mask, ev.Cookie, name)
			off = end
		}
	}
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
	if !slicesContains(w.order, rel) {
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

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
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
