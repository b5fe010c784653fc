package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// Watcher reports changes under a directory tree as proto.FileEvents, using
// inotify: every directory gets a watch, new directories get one as they
// appear (and what was created in them before the watch existed is reported
// by a scan), renames are paired by cookie, and bursts are coalesced: the
// writes of one file within the delay become one "modified", a file created
// and deleted within it is not reported at all.
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
	wds     map[int32]string // watch → directory, relative to root ("" is root)
	dirs    map[string]int32 // directory → watch
	pending map[string]*pendingEvent
	order   []string // pending paths in first-seen order
	moves   map[uint32]pendingMove
	first   time.Time // when the oldest pending event was seen

	reqMu   sync.Mutex
	reqs    []chan struct{}
	stopped bool
	done    chan struct{}
}

type pendingEvent struct {
	action  string
	oldPath string
	dir     bool
	seen    time.Time
}

type pendingMove struct {
	rel  string
	dir  bool
	seen time.Time
}

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// NewWatcher starts watching root recursively. emit is called from the
// watcher's goroutine, in order; it may block (the kernel queues meanwhile,
// and reports an overflow if its queue fills).
func NewWatcher(root string, delay time.Duration, emit func(proto.FileEvent)) (*Watcher, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory", root)
	}
	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(ino)
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &Watcher{
		root: root, delay: delay, emit: emit, ino: ino, wakeR: p[0], wakeW: p[1],
		wds: map[int32]string{}, dirs: map[string]int32{}, pending: map[string]*pendingEvent{},
		moves: map[uint32]pendingMove{}, done: make(chan struct{}),
	}
	if err := w.addTree("", false); err != nil {
		w.closeFDs()
		return nil, err
	}
	go w.loop()
	return w, nil
}

// Flush reports every change made before it was called, then returns.
func (w *Watcher) Flush() {
	ch := make(chan struct{})
	w.reqMu.Lock()
	if w.stopped {
		w.reqMu.Unlock()
		return
	}
	w.reqs = append(w.reqs, ch)
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
		if len(w.pending) > 0 || len(w.moves) > 0 {
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
				for _, ch := range reqs {
					close(ch)
				}
				return
			}
			if len(reqs) > 0 {
				w.readEvents(buf) // everything queued before the request
				w.flushAll()
				for _, ch := range reqs {
					close(ch)
				}
			}
		}
		if (len(w.pending) > 0 || len(w.moves) > 0) && !time.Now().Before(w.first.Add(w.delay)) {
			w.flushAll()
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

func (w *Watcher) handle(wd int32, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.flushAll()
		w.emit(proto.FileEvent{Action: proto.ActionOverflow, Path: ".", Time: time.Now().UnixNano()})
		return
	}
	dir, ok := w.wds[wd]
	if !ok {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.wds, wd)
		if w.dirs[dir] == wd {
			delete(w.dirs, dir)
		}
		return
	}
	if name == "" {
		return // an event on the directory itself
	}
	rel := path.Join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&unix.IN_CREATE != 0:
		w.record(proto.ActionCreated, rel, "", isDir)
		if isDir {
			_ = w.addTree(rel, true)
		}
	case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
		if !isDir {
			w.record(proto.ActionModified, rel, "", false)
		}
	case mask&unix.IN_DELETE != 0:
		w.record(proto.ActionDeleted, rel, "", isDir)
		if isDir {
			w.forgetTree(rel, false)
		}
	case mask&unix.IN_MOVED_FROM != 0:
		if len(w.pending) == 0 && len(w.moves) == 0 {
			w.first = time.Now()
		}
		w.moves[cookie] = pendingMove{rel: rel, dir: isDir, seen: time.Now()}
	case mask&unix.IN_MOVED_TO != 0:
		if from, ok := w.moves[cookie]; ok {
			delete(w.moves, cookie)
			w.record(proto.ActionRenamed, rel, from.rel, isDir)
			if isDir {
				w.renameTree(from.rel, rel)
			}
		} else { // moved in from outside the tree
			w.record(proto.ActionCreated, rel, "", isDir)
			if isDir {
				_ = w.addTree(rel, true)
			}
		}
	}
}

// record adds an event to the pending set, coalescing with what is there.
func (w *Watcher) record(action, rel, old string, isDir bool) {
	now := time.Now()
	if len(w.pending) == 0 && len(w.moves) == 0 {
		w.first = now
	}
	put := func(p string, e *pendingEvent) {
		if _, ok := w.pending[p]; !ok {
			w.order = append(w.order, p)
		}
		w.pending[p] = e
	}
	prev := w.pending[rel]
	switch action {
	case proto.ActionCreated:
		if prev != nil && prev.action == proto.ActionDeleted {
			put(rel, &pendingEvent{action: proto.ActionModified, dir: isDir, seen: prev.seen}) // replaced
			return
		}
		put(rel, &pendingEvent{action: action, dir: isDir, seen: now})
	case proto.ActionModified:
		if prev != nil && prev.action != proto.ActionDeleted {
			return // created, modified or renamed already says it
		}
		put(rel, &pendingEvent{action: action, seen: now})
	case proto.ActionDeleted:
		switch {
		case prev != nil && prev.action == proto.ActionCreated:
			delete(w.pending, rel) // came and went within the delay
		case prev != nil && prev.action == proto.ActionRenamed:
			delete(w.pending, rel)
			put(prev.oldPath, &pendingEvent{action: action, dir: isDir, seen: now})
		default:
			put(rel, &pendingEvent{action: action, dir: isDir, seen: now})
		}
	case proto.ActionRenamed:
		src := w.pending[old]
		delete(w.pending, old)
		if src != nil && src.action == proto.ActionCreated {
			put(rel, &pendingEvent{action: proto.ActionCreated, dir: isDir, seen: src.seen})
			return
		}
		put(rel, &pendingEvent{action: action, oldPath: old, dir: isDir, seen: now})
	}
}

// flushAll emits every pending event: unpaired moves out of the tree as
// deletions, then the rest in first-seen order.
func (w *Watcher) flushAll() {
	for cookie, mv := range w.moves {
		delete(w.moves, cookie)
		w.record(proto.ActionDeleted, mv.rel, "", mv.dir)
		if mv.dir {
			w.forgetTree(mv.rel, true)
		}
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
		if e.action != proto.ActionDeleted {
			if st, err := os.Lstat(filepath.Join(w.root, filepath.FromSlash(p))); err == nil {
				ev.Dir = st.IsDir()
				if st.Mode().IsRegular() {
					ev.Size = st.Size()
				}
			}
		}
		w.emit(ev)
	}
	w.pending = map[string]*pendingEvent{}
}

// addTree watches rel and every directory under it; with report, what it
// finds is recorded as created (it appeared before the watch could see it).
func (w *Watcher) addTree(rel string, report bool) error {
	abs := filepath.Join(w.root, filepath.FromSlash(rel))
	wd, err := unix.InotifyAddWatch(w.ino, abs, watchMask)
	if err != nil {
		if rel != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)) {
			return nil // gone already
		}
		return fmt.Errorf("watch %s: %w", abs, err)
	}
	w.wds[int32(wd)] = rel
	w.dirs[rel] = int32(wd)
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		child := path.Join(rel, e.Name())
		if report {
			w.record(proto.ActionCreated, child, "", e.IsDir())
		}
		if e.IsDir() { // DirEntry.IsDir does not follow symlinks
			if err := w.addTree(child, report); err != nil && rel == "" {
				return err
			}
		}
	}
	return nil
}

// forgetTree drops the watches of rel and below; with remove, the kernel
// watches too (a directory moved out of the tree still exists).
func (w *Watcher) forgetTree(rel string, remove bool) {
	for d, wd := range w.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			delete(w.dirs, d)
			delete(w.wds, wd)
			if remove {
				_, _ = unix.InotifyRmWatch(w.ino, uint32(wd))
			}
		}
	}
}

// renameTree moves the watches of old and below to new.
func (w *Watcher) renameTree(old, new string) {
	moved := map[string]int32{}
	for d, wd := range w.dirs {
		if d == old || strings.HasPrefix(d, old+"/") {
			moved[d] = wd
		}
	}
	for d, wd := range moved {
		nd := new + strings.TrimPrefix(d, old)
		delete(w.dirs, d)
		w.dirs[nd] = wd
		w.wds[wd] = nd
	}
}
