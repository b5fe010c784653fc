package agent

import (
	"fmt"
	"strconv"
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
	// outlived its budget, so changes made meanwhile in directories
	// not reached yet went unseen.
	backlog []int32
	partial bool

	reqMu   sync.Mutex
	reqs    []watchReq
	stopped bool
	done    chan struct{}
}

type watchReq struct {
	done chan struct{}
	emit bool // flush pending events too (else only read the kernel's queue)
}

// watchTrace, when set (tests), sees every raw event and every emitted one.
var watchTrace func(format string, args ...any)

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// NewWatcher starts watching root recursively: the tree already there is
// listed for up to budget before NewWatcher returns, the rest in the
// background (see InitialScanBudget). emit is called from the
// watcher's goroutine, in order; it may block (the kernel queues meanwhile,
// and reports an overflow if its queue fills).
func NewWatcher(root string, delay, budget time.Duration, emit func(proto.FileEvent)) (*Watcher, error) {
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
	w.drainBacklog(time.Now().Add(budget))
	w.partial = len(w.backlog) > 0
	go w.loop()
	return w, nil
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
