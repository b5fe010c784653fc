package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// Keys.

const (
	sessionPrefix = "s/"
	eventPrefix   = "e/"
)

func sessionKey(id string) []byte { return append([]byte(sessionPrefix), id...) }

func eventKeyPrefix(id string) []byte {
	b := make([]byte, 0, len(eventPrefix)+len(id)+1)
	b = append(b, eventPrefix...)
	b = append(b, id...)
	return append(b, '/')
}

func appendEventKey(b []byte, id string, seq uint64) []byte {
	b = append(b, eventPrefix...)
	b = append(b, id...)
	b = append(b, '/')
	return binary.BigEndian.AppendUint64(b, seq)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// checkID reports whether id can name a session: 1 to 128 printable ASCII
// characters, no '/' and no space.
func checkID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("store: session id %q must be 1 to 128 characters", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("store: session id %q: only printable ASCII without '/' or spaces is allowed", id)
		}
	}
	return nil
}

// NewSessionID returns a new session id that sorts by creation time: the UTC
// time to the second, a dash and 6 random hex digits, e.g.
// "20261121T210455Z-3f9a1c".
func NewSessionID() string {
	var r [3]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read does not fail
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:])
}

// Session records: a version byte, then JSON. They are written a few times
// per batch at most, so JSON's cost does not matter and unknown fields are
// ignored by older readers.

const sessionVersion = 1

type sessionRecord struct {
	ID           string           `json:"id"`
	StartedAt    time.Time        `json:"started_at"`
	EndedAt      *time.Time       `json:"ended_at,omitempty"`
	Command      []string         `json:"command,omitempty"`
	ExitCode     *int             `json:"exit_code,omitempty"`
	PolicySHA256 string           `json:"policy_sha256,omitempty"`
	Image        string           `json:"image,omitempty"`
	Host         string           `json:"host,omitempty"`
	Events       int64            `json:"events"`
	Kinds        map[Kind]int64   `json:"kinds,omitempty"`
	Allowed      int64            `json:"allowed,omitempty"`
	Denied       int64            `json:"denied,omitempty"`
	Lost         int64            `json:"lost,omitempty"`
	Agent        map[string]int64 `json:"agent,omitempty"`
	Bytes        int64            `json:"bytes,omitempty"`
}

func encodeSession(s *Session) []byte {
	r := sessionRecord{
		ID:           s.ID,
		StartedAt:    s.StartedAt.UTC(),
		Command:      s.Command,
		ExitCode:     s.ExitCode,
		PolicySHA256: s.PolicySHA256,
		Image:        s.Image,
		Host:         s.Host,
		Events:       s.Counts.Events,
		Kinds:        s.Counts.Kinds,
		Allowed:      s.Counts.Allowed,
		Denied:       s.Counts.Denied,
		Lost:         s.Counts.Lost,
		Agent:        s.Counts.Agent,
		Bytes:        s.Counts.Bytes,
	}
	if !s.EndedAt.IsZero() {
		t := s.EndedAt.UTC()
		r.EndedAt = &t
	}
	b, err := json.Marshal(&r)
	if err != nil {
		// Only strings, ints, times and maps of those: cannot happen.
		panic(fmt.Sprintf("store: encoding a session record: %v", err))
	}
	return append([]byte{sessionVersion}, b...)
}

func decodeSession(v []byte) (Session, error) {
	if len(v) == 0 {
		return Session{}, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if v[0] != sessionVersion {
		return Session{}, fmt.Errorf("%w %d (this build reads version %d; the store was written by a newer capsem, or is damaged)",
			ErrUnknownVersion, v[0], sessionVersion)
	}
	var r sessionRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return Session{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	s := Session{
		ID:           r.ID,
		StartedAt:    r.StartedAt,
		Command:      r.Command,
		ExitCode:     r.ExitCode,
		PolicySHA256: r.PolicySHA256,
		Image:        r.Image,
		Host:         r.Host,
		Counts:       Counts{Events: r.Events, Kinds: r.Kinds, Allowed: r.Allowed, Denied: r.Denied, Lost: r.Lost, Agent: r.Agent, Bytes: r.Bytes},
	}
	if r.EndedAt != nil {
		s.EndedAt = *r.EndedAt
	}
	return s, nil
}

// Session returns the record of session id, or an error wrapping ErrNotFound.
func (s *Store) Session(id string) (Session, error) {
	if err := s.acquire(); err != nil {
		return Session{}, err
	}
	defer s.release()
	v, closer, err := s.db.Get(sessionKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Session{}, fmt.Errorf("store: session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: read session %q: %w", id, err)
	}
	defer closer.Close()
	sess, err := decodeSession(v)
	if err != nil {
		return Session{}, fmt.Errorf("store: session record %q: %w", id, err)
	}
	return sess, nil
}

// Sessions returns every session in the store, newest (latest StartedAt)
// first.
func (s *Store) Sessions() ([]Session, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	lo := []byte(sessionPrefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	defer it.Close()
	var out []Session
	for it.First(); it.Valid(); it.Next() {
		id := string(it.Key()[len(sessionPrefix):])
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("store: read session %q: %w", id, err)
		}
		sess, err := decodeSession(v)
		if err != nil {
			return nil, fmt.Errorf("store: session record %q: %w", id, err)
		}
		out = append(out, sess)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Session) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// Events calls fn with each event of session id, in sequence order. It stops
// at the first error fn returns and returns it. An event that cannot be
// decoded (garbage, or a version from a newer capsem) stops the walk with an
// error naming the session and sequence number. A session whose writer
// crashed is read up to its last synced event.
//
// The Event passed to fn, and its payload, are fn's to keep.
func (s *Store) Events(id string, fn func(Event) error) error {
	if _, err := s.Session(id); err != nil {
		return err
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	lo := eventKeyPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read events of %q: %w", id, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(lo)+8 {
			return fmt.Errorf("store: session %q: event key %q: %w: key is not prefix + 8-byte sequence", id, k, ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(k[len(lo):])
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("store: session %q event %d: %w", id, seq, err)
		}
		ev := Event{Session: id, Seq: seq}
		if err := decodeEvent(v, &ev); err != nil {
			return fmt.Errorf("store: session %q event %d: %w", id, seq, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: read events of %q: %w", id, err)
	}
	return nil
}

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
	meta.EndedAt, meta.ExitCode, meta.Counts = time.Time{}, nil, Counts{}
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
// waits (the disk is full: it will hold its event instead).
func (s *Store) wakeWriters() {
	for _, w := range s.openWriters() {
		w.mu.Lock()
		w.room.Broadcast()
		w.mu.Unlock()
	}
}

// fatal is what pebble's Fatalf does: pebble met an error it cannot go on
// from (a write that failed even after diskWatch.enospc waited for space, a
// manifest it could not write) and must not return to its caller. The
// store is marked broken: every writer fails (Admit refuses, Append counts
// events as lost, End and Close return without waiting for pebble), and the
// events already synced stay in the write-ahead log for the next Open. It
// reports whether the calling goroutine should be parked rather than panic:
// a process that records a session (capsem run, capsem-net), or is ending
// one, must outlive its store — the guest keeps running, refused, and the
// user is told; End and Close return, waiting on broken rather than on the
// parked write — while a process that only reads or imports had better
// stop with the message.
func (s *Store) fatal(err error) (park bool) {
	s.brokenOnce.Do(func() {
		s.brokenErr = err
		close(s.broken)
	})
	ws := s.openWriters()
	for _, w := range ws {
		w.mu.Lock()
		if w.err == nil {
			w.failLocked(err, w.inFlight)
		}
		w.mu.Unlock()
	}
	return len(ws) > 0 || s.ending.Load() > 0
}

// brokenError returns the error fatal recorded, or nil.
func (s *Store) brokenError() error {
	select {
	case <-s.broken:
		return s.brokenErr
	default:
		return nil
	}
}

// logger routes pebble's messages to slog: its informational chatter at
// debug level, errors at error level, and a fatal error to Store.fatal.
type logger struct{ s *Store }

func (logger) Infof(format string, args ...any) {
	slog.Debug("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (logger) Errorf(format string, args ...any) {
	slog.Error("store: pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l logger) Fatalf(format string, args ...any) {
	msg := "store: pebble fatal: " + strings.TrimSpace(fmt.Sprintf(format, args...))
	slog.Error(msg)
	if l.s != nil && l.s.fatal(errors.New(msg)) {
		select {} // pebble expects Fatalf not to return; see Store.fatal
	}
	panic(msg) // pebble expects Fatalf not to return
}
