package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is wrapped by the error returned for a session that is not in
// the store.
var ErrNotFound = errors.New("session not found")

// ErrInUse is wrapped by the error Open returns when another Store, in this
// process or another, has the directory open. See [InUseError].
var ErrInUse = errors.New("store in use")

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("store: closed")

// InUseError says that a store directory is held by another process (or by
// another Store in this process). errors.Is(err, ErrInUse) reports true.
type InUseError struct {
	Dir string
	PID int // the holder's process id; 0 when unknown
}

func (e *InUseError) Error() string {
	switch {
	case e.PID == os.Getpid():
		return fmt.Sprintf("store: %s is in use by this process (pid %d): it is already open; close it first or reuse the open Store", e.Dir, e.PID)
	case e.PID > 0:
		return fmt.Sprintf("store: %s is in use by another process (pid %d); wait for it to exit or use another store directory", e.Dir, e.PID)
	}
	return fmt.Sprintf("store: %s is in use by another process; wait for it to exit or use another store directory", e.Dir)
}

func (e *InUseError) Unwrap() error { return ErrInUse }

// Store is an open event log directory. Its methods are safe for concurrent
// use.
type Store struct {
	dir      string
	db       *pebble.DB
	lock     io.Closer
	readOnly bool
	opts     Options
	disk     *diskWatch

	mu       sync.Mutex // serialises Begin and Close
	closed   bool
	inflight sync.WaitGroup // reads and writes that use db outside mu

	wmu     sync.Mutex // guards writers only: never held across a pebble call (see fatal)
	writers map[*Writer]struct{}

	ending     atomic.Int32  // End, Close or a writer's stop under way: a full disk is waited for only so long
	recorded   atomic.Bool   // Begin was called: a fatal pebble error parks its goroutine (fatal.go)
	broken     chan struct{} // closed by fatal
	brokenErr  error
	brokenOnce sync.Once
}

// Open opens the store in dir for reading and writing, creating dir and the
// database when they do not exist. Only one Store may have a directory open
// at a time; a second Open returns an error wrapping ErrInUse that names the
// holder's pid when it can. Opening a store whose writer was killed is
// normal: the write-ahead log is replayed and every synced event is there.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options: the session byte budget and the free
// space kept on the store's disk (see Options).
func OpenWith(dir string, opt Options) (*Store, error) { return open(dir, false, opt) }

// OpenReadOnly opens an existing store for reading only: Begin fails and the
// database is not modified (a crashed writer's log is replayed in memory;
// only capsem's lock file records the reader's pid). It takes the same lock
// as Open, so it fails with ErrInUse while a writer has the store open.
func OpenReadOnly(dir string) (*Store, error) { return open(dir, true, Options{MinFreeDisk: -1}) }

// closeGrace is how long a write that met a full disk waits for space when
// no session is recording — the store is ending (End or Close), or it has
// no writer (Open, Import) — before it gives up; pebble then stops writing
// for good (see fatal), and the session keeps its synced events.
var closeGrace = 10 * time.Second

func open(dir string, readOnly bool, opt Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("store: no directory given")
	}
	if readOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("store: open %s read-only: %w", dir, err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir, readOnly)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, lock: lock, readOnly: readOnly, opts: opt, writers: map[*Writer]struct{}{}, broken: make(chan struct{})}
	s.disk = newDiskWatch(dir, opt.MinFreeDisk, opt.freeSpace)
	opts := &pebble.Options{
		Logger: logger{s},
		// Small memtables and block cache: pebble allocates both outside
		// the Go heap, and at 32 MiB (chosen for a ~1.6x ingest rate) the
		// memtable doubled at each flush through a 10-minute soak, capsem-net
		// climbing 2.5 MB/min; at 4 MiB and a 1 MiB cache the slope is
		// 0.23 MB/min and flat from minute 6 (bench/soakbench), and ingest
		// stays far above what the netstack's aggregation lets a guest
		// send (~9 KB/s per reason).
		MemTableSize: 4 << 20,
		CacheSize:    1 << 20,
		ReadOnly:     readOnly,
	}
	if readOnly {
		opts.ErrorIfNotExists = true
	} else {
		// A write that meets ENOSPC waits for space, then is retried once,
		// instead of failing: pebble stops the process on a failed
		// write-ahead-log or manifest write.
		base := opt.fs
		if base == nil {
			base = vfs.Default
		}
		opts.FS = vfs.OnDiskFull(base, func() {
			s.disk.enospc(s.recordingStopped, closeGrace, s.wakeWriters)
		})
	}
	if !readOnly {
		if err := s.disk.writable(); err != nil {
			lock.Close()
			return nil, fmt.Errorf("store: open %s: %w", dir, err)
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		lock.Close()
		if strings.Contains(err.Error(), "lock") {
			return nil, fmt.Errorf("%w (%v)", &InUseError{Dir: dir}, err)
		}
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			// Read-only on a directory no store was made in: callers test
			// for fs.ErrNotExist, as for a directory that is not there.
			return nil, fmt.Errorf("store: open %s: no event store in it: %w", dir, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s.db = db
	return s, nil
}

// Dir returns the directory the store was opened from.
func (s *Store) Dir() string { return s.dir }

// Close flushes and syncs the events of every Writer still open (their
// sessions stay without EndedAt: call End for that), waits for reads in
// progress, then closes the database and releases the directory. It must
// not be called from inside an Events callback.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, w := range s.openWriters() {
		if err := w.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.brokenError(); err != nil {
		// pebble may be parked inside a write: closing it would wait for
		// that write. The process's exit releases it; the next Open
		// replays its write-ahead log.
		errs = append(errs, fmt.Errorf("store: %s was left open after a fatal write error; its synced events are kept: %w", s.dir, err))
	} else {
		s.inflight.Wait()
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close %s: %w", s.dir, err))
		}
	}
	if err := s.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: unlock %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// acquire registers an operation that uses db, so that Close waits for it;
// release ends it.
func (s *Store) acquire() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

func (s *Store) release() { s.inflight.Done() }

// Begin starts a new session and returns its Writer. meta.ID may be empty,
// in which case a new id is generated (see NewSessionID); a given id must not
// exist in the store yet. meta.StartedAt is set to now when zero; EndedAt,
// ExitCode and Counts are ignored (End sets them). The session record is
// synced before Begin returns.
func (s *Store) Begin(meta Session) (*Writer, error) {
	if s.readOnly {
		return nil, errors.New("store: Begin on a store opened read-only")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.recorded.Store(true)
	generate := meta.ID == ""
	for try := 0; ; try++ {
		if generate {
			meta.ID = NewSessionID()
		}
		if err := checkID(meta.ID); err != nil {
			return nil, err
		}
		_, closer, err := s.db.Get(sessionKey(meta.ID))
		if errors.Is(err, pebble.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("store: begin session %q: %w", meta.ID, err)
		}
		closer.Close()
		if !generate || try == 10 {
			return nil, fmt.Errorf("store: session %q already exists; a session is written once, pick another id", meta.ID)
		}
	}
	if st, _ := s.disk.check(time.Now(), 0); st != diskOK {
		return nil, fmt.Errorf("store: begin session %q: %s", meta.ID, s.disk.message(st))
	}
	if meta.StartedAt.IsZero() {
		meta.StartedAt = time.Now()
	}
	meta.StartedAt = meta.StartedAt.UTC()
	meta.Command = slices.Clone(meta.Command)
	meta.Placeholders = mergePlaceholders(nil, meta.Placeholders)
	meta.EndedAt, meta.ExitCode, meta.Counts = time.Time{}, nil, Counts{}
	meta.Chain = &Chain{Head: ChainGenesis(meta.ID)}
	seal(&meta, s.opts.SealKey)
	if err := s.db.Set(sessionKey(meta.ID), encodeSession(&meta), pebble.Sync); err != nil {
		return nil, fmt.Errorf("store: record session %q: %w", meta.ID, err)
	}
	w := newWriter(s, meta)
	s.wmu.Lock()
	s.writers[w] = struct{}{}
	s.wmu.Unlock()
	return w, nil
}

func (s *Store) forget(w *Writer) {
	s.wmu.Lock()
	delete(s.writers, w)
	s.wmu.Unlock()
}

func (s *Store) openWriters() []*Writer {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ws := make([]*Writer, 0, len(s.writers))
	for w := range s.writers {
		ws = append(ws, w)
	}
	return ws
}

// recordingStopped reports whether no session is recording: End or Close
// is under way, or no writer is open. A write that meets a full disk then
// waits only closeGrace for space; while a session records, it waits for
// good, with Admit refusing and Append counting.
func (s *Store) recordingStopped() bool {
	if s.ending.Load() > 0 {
		return true
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return len(s.writers) == 0
}

// wakeWriters wakes every Append waiting for room, to look again at why it
// waits (the disk is full: it holds its event instead).
func (s *Store) wakeWriters() {
	for _, w := range s.openWriters() {
		w.mu.Lock()
		w.room.Broadcast()
		w.mu.Unlock()
	}
}
