package store

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Group-commit limits. While the committer writes one batch, Append fills the
// next; when that one reaches either limit, Append blocks until the
// committer takes it. Memory is bounded at about two batches.
// They are variables only so that a test can make the queue tiny.
var (
	maxBatchEvents = 16 << 10
	maxBatchBytes  = 1 << 20
)

// recordEvery is how often, at most, the committer rewrites the session's
// record (its counts and its chain's head and seal) with a batch: every
// batch when batches are further apart, which is nearly always. Writing it
// with every batch, as the writer first did, kept ingest at ~0.9–1.0M
// events/s on the 2-core test machine with ~70% of the CPU in pebble's
// flushes and compactions: every flushed table held the record's key,
// after all of the session's event keys, so that each table overlapped
// every later one and none moved down a level without being rewritten.
// Measured with the hash chain's SHA-256 per event (bench:store, 3.5M
// events): every batch 0.75M/s, at most every 100 ms 0.83M/s, every
// second 1.24–1.37M/s. The price: the record of a writer that crashes
// lags its events by up to a second. Those events are all on disk and
// chained; the record's counts and seal cover the ones up to its head,
// and readers say how many follow it (ChainStatus.Unsealed).
const recordEvery = time.Second

// stallAfter is how long one group commit may take before the writer counts
// it as stalled: Admit refuses, and Append, rather than wait for room, holds
// events as counts (see unstored.go) until the commit completes. A commit
// is one fsync of at most 1 MiB: ~1–10 ms on this project's disks, ~100 ms
// on a busy spinning disk; 5 s is a disk that is not answering (or a full
// one, whose write waits in diskWatch.enospc for space). A variable so that
// a test can shorten it.
var stallAfter = 5 * time.Second

// Writer appends the events of one session. Its methods are safe for
// concurrent use.
type Writer struct {
	s       *Store
	id      string
	meta    Session // as recorded by Begin; Counts live in counts
	sessKey []byte
	done    chan struct{} // closed when the committer exits

	mu       sync.Mutex
	room     sync.Cond // Append waits here while the batch is full
	work     sync.Cond // the committer waits here for events
	synced   sync.Cond // Sync waits here
	cur      *pebble.Batch
	spare    *pebble.Batch // nil while the committer holds it
	curN     int
	seq      uint64 // last sequence number given out
	durable  uint64 // last sequence number synced
	counts   Counts // of the events given a sequence number
	err      error  // first write error; sticky
	lost     int64  // events appended but not recorded
	stopping bool   // End or Close was called: refuse new events
	ended    bool
	keyBuf   []byte
	head     [sha256.Size]byte // the hash chain's head: the last event's value hash
	// recordAt is when the committer last wrote the session's record;
	// recordDue asks it to write the next one whatever the time (a new
	// placeholder must reach the record with the events that hold it).
	recordAt  time.Time
	recordDue bool
	recorded  uint64 // the last seq a synced record covers
	inFlight  int    // events in the batch the committer is writing
	stalled   bool   // that batch has taken longer than stallAfter

	// linger is Options.CommitLinger; kick cuts a linger short (Sync,
	// stop, a full batch) and lingerTimer ends it.
	linger      time.Duration
	kick        chan struct{}
	lingerTimer *time.Timer

	// The byte budget (budget.go) and the events held as counts
	// (unstored.go).
	budget     int64 // Options.MaxSessionBytes; 0: no limit
	allowance  int64 // what may be stored past the budget: refusals, aggregates
	overBudget bool
	bytes      int64     // stored: Counts.Bytes
	gap        gap       // events held since the last unstored event was written
	unstored   int64     // events held as counts, in all (part of Counts.Lost)
	diskSeen   diskState // the disk state the session's record last noted
	refusal    error     // SetRefusal's: Admit refuses while it is set
}

func newWriter(s *Store, meta Session) *Writer {
	w := &Writer{
		s:       s,
		id:      meta.ID,
		meta:    meta,
		sessKey: sessionKey(meta.ID),
		done:    make(chan struct{}),
		cur:     newBatch(s.db),
		spare:   newBatch(s.db),
		counts:  Counts{Kinds: map[Kind]int64{}},
		head:    ChainGenesis(meta.ID),
	}
	w.budget, w.allowance = budgetOf(s.opts.MaxSessionBytes)
	w.linger, w.kick = s.opts.commitLinger(), make(chan struct{}, 1)
	w.lingerTimer = time.NewTimer(time.Hour)
	w.lingerTimer.Stop()
	w.room.L = &w.mu
	w.work.L = &w.mu
	w.synced.L = &w.mu
	go w.commitLoop()
	return w
}

func newBatch(db *pebble.DB) *pebble.Batch {
	return db.NewBatchWithSize(maxBatchBytes+maxBatchBytes/4, pebble.WithMaxRetainedSizeBytes(8*maxBatchBytes))
}

// ID returns the session id.
func (w *Writer) ID() string { return w.id }

// NotePlaceholders adds to the session's record the placeholders of a
// policy's secrets, by secret name (policy.Policy.Placeholders): at the
// start, and at each reload, which may bring new secrets or a new fixed
// placeholder. Those noted before stay: the events hold them. The record
// carries them from the next commit on.
func (w *Writer) NotePlaceholders(byName map[string]string) {
	var ps []Placeholder
	for name, v := range byName {
		ps = append(ps, Placeholder{Name: name, Value: v})
	}
	w.mu.Lock()
	w.meta.Placeholders = mergePlaceholders(w.meta.Placeholders, ps)
	w.recordDue = true
	w.work.Signal()
	w.mu.Unlock()
}

// mergePlaceholders returns have and add, without empty values or
// repeats, sorted by name then value.
func mergePlaceholders(have, add []Placeholder) []Placeholder {
	out := slices.Clone(have)
	for _, p := range add {
		if p.Value != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Placeholder) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Value, b.Value))
	})
	return out
}

var encPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Append records ev. It fills ev.Session and ev.Seq (the next number, with no
// gaps), ev.Time when zero, and ev.Kind when empty and a payload is set.
// Append copies what it needs before it returns: the caller may reuse ev and
// its payload. When the committer is behind, it blocks until there is room
// (backpressure). The event is durable once a later Sync returns nil (the
// committer syncs continuously, so that is usually soon).
//
// Append never blocks for good and never drops an event silently. An event
// that cannot be written is counted (Counts.Lost), logged, and reported by
// Err, Sync and End: appended after End or Close, or after a write error;
// or held as a count, with its kind, while the store's disk is below its
// floor, while a commit has stalled (longer than stallAfter) with the queue
// full, or once the session is past its byte budget and the allowance after
// it — each such run of held events becomes one RecordingUnstored event
// where writing resumes (or at End), so that the log says where its gap is.
func (w *Writer) Append(ev Event) {
	if ev.Kind == "" {
		ev.Kind = kindOf(&ev)
	}
	bp := encPool.Get().(*[]byte)
	v := appendChainedEvent((*bp)[:0], &ev)

	w.mu.Lock()
	for w.batchFullLocked() && w.err == nil && !w.stopping && !w.stalled && !w.s.disk.full.Load() {
		w.room.Wait()
	}
	if w.err != nil || w.stopping {
		w.loseLocked(&ev)
		w.mu.Unlock()
		putEnc(bp, v)
		return
	}
	now := time.Now()
	if ev.Time.IsZero() {
		binary.BigEndian.PutUint64(v[timeOffset:], uint64(now.UnixNano()))
	}
	if why := w.refuseLocked(now, int64(len(v)+w.keyLen())); why != "" {
		w.holdLocked(ev.Kind, why, now)
		w.mu.Unlock()
		putEnc(bp, v)
		return
	}
	w.putLocked(v, &ev)
	w.checkBudgetLocked()
	w.mu.Unlock()
	putEnc(bp, v)
}

func kindOf(ev *Event) Kind {
	switch {
	case ev.DNS != nil:
		return KindDNS
	case ev.Net != nil:
		return KindNet
	case ev.ModelCall != nil:
		return KindModelCall
	case ev.Exec != nil:
		return KindExec
	case ev.FS != nil:
		return KindFS
	case ev.Agent != nil:
		return KindAgent
	case ev.Recording != nil:
		return KindRecording
	case ev.MCPCall != nil:
		return KindMCPCall
	}
	return ""
}

func (w *Writer) batchFullLocked() bool {
	return w.curN > 0 && (w.curN >= maxBatchEvents || w.cur.Len() >= maxBatchBytes)
}

func (w *Writer) keyLen() int { return eventKeyLen(w.id) }

// putLocked gives the encoded event v (appendChainedEvent) the next
// sequence number and the hash chain's prev, and adds it to the batch
// being filled.
//
// The hash is taken here, under the lock, because it must follow the
// sequence order and v is already in hand: SHA-256 of a typical ~200-byte
// value is ~180 ns with SHA-NI; what that costs Append is measured in
// docs/BENCHMARKS.md (bench:store).
func (w *Writer) putLocked(v []byte, ev *Event) {
	copy(v[prevOffset:chainedHeaderLen], w.head[:])
	w.head = sha256.Sum256(v)
	w.seq++
	w.keyBuf = appendEventKey(w.keyBuf[:0], w.id, w.seq)
	_ = w.cur.Set(w.keyBuf, v, nil) // cannot fail: the batch is not indexed
	w.curN++
	w.bytes += int64(len(w.keyBuf) + len(v))
	w.counts.add(ev)
	if w.curN == 1 {
		w.work.Signal()
	}
	if w.batchFullLocked() {
		w.kickLocked()
	}
}

// putRecordingLocked adds an event of the store's own (KindRecording) to
// the batch, whatever the queue, budget or disk say: there are a handful
// per session, and they are what makes a gap in the record visible.
func (w *Writer) putRecordingLocked(r Recording, now time.Time) {
	ev := Event{Time: now, Kind: KindRecording, Recording: &r}
	w.putLocked(appendChainedEvent(nil, &ev), &ev)
}

func putEnc(bp *[]byte, v []byte) {
	if cap(v) > 64<<10 {
		return // do not keep a buffer grown by one huge event
	}
	*bp = v
	encPool.Put(bp)
}

func (c *Counts) add(ev *Event) {
	c.Events++
	c.Kinds[ev.Kind]++
	switch {
	case ev.DNS != nil && ev.DNS.Decision == Denied:
		c.Denied += max(ev.DNS.Count, 1)
	case ev.DNS != nil && ev.DNS.Decision == Allowed:
		c.Allowed += max(ev.DNS.Count, 1)
	case ev.Net != nil && ev.Net.Decision == Denied:
		c.Denied += max(ev.Net.Count, 1)
	case ev.Net != nil && ev.Net.Decision == Allowed:
		c.Allowed += max(ev.Net.Count, 1)
	case ev.ModelCall != nil:
		c.InputTokens += ev.ModelCall.InputTokens
		c.OutputTokens += ev.ModelCall.OutputTokens
		c.CostUSD += ev.ModelCall.CostUSD
	case ev.Agent != nil:
		if c.Agent == nil {
			c.Agent = map[string]int64{}
		}
		c.Agent[ev.Agent.State] += max(ev.Agent.Count, 1)
	}
}

// loseLocked counts an event that cannot be recorded and logs it, at
// 1, 2, 4, 8, … lost events so that a flood does not flood the log.
func (w *Writer) loseLocked(ev *Event) {
	w.lost++
	if w.lost&(w.lost-1) != 0 {
		return
	}
	why := "the session has ended (Append after End or Close)"
	if w.err != nil {
		why = "writing to the store failed: " + w.err.Error()
	}
	slog.Error("store: event not recorded", "session", w.id, "kind", string(ev.Kind), "reason", why, "lost", w.lost)
}

// commitLoop is the committer: it takes the batch being filled, adds the
// session record with the current counts (at most every recordEvery),
// commits it with a WAL sync, and hands the batch back for reuse. Events that arrive while a commit is in
// flight go into the next batch: that is the group commit.
func (w *Writer) commitLoop() {
	defer close(w.done)
	w.mu.Lock()
	for {
		for w.curN == 0 && !w.stopping && !w.recordDue {
			w.work.Wait()
		}
		if w.curN == 0 && !w.recordDue { // stopping, and everything is committed
			break
		}
		w.lingerLocked()
		b, n, last := w.cur, w.curN, w.seq
		w.cur, w.spare, w.curN = w.spare, nil, 0
		w.inFlight = n
		var sess *Session
		if now := time.Now(); w.recordDue || now.Sub(w.recordAt) >= recordEvery {
			s := w.snapshotLocked()
			sess = &s
			w.recordAt, w.recordDue = now, false
		}
		w.room.Broadcast()
		w.mu.Unlock()

		if sess != nil {
			seal(sess, w.s.opts.SealKey)
			_ = b.Set(w.sessKey, encodeSession(sess), nil)
		}
		watchdog := time.AfterFunc(stallAfter, w.markStalled)
		err := b.Commit(pebble.Sync)
		watchdog.Stop()
		b.Reset()

		w.mu.Lock()
		w.inFlight = 0
		if w.stalled {
			w.stalled = false
			slog.Info("store: writing resumed after a stall", "session", w.id, "dir", w.s.dir)
		}
		w.spare = b
		if err != nil {
			w.failLocked(err, n)
			break
		}
		w.durable = last
		if sess != nil {
			w.recorded = sess.Chain.Seq
		}
		w.synced.Broadcast()
	}
	w.cur.Close()
	w.spare.Close()
	w.cur, w.spare = nil, nil
	w.synced.Broadcast() // a Sync waiting for a record that will not come
	w.mu.Unlock()
}

// lingerLocked waits up to w.linger for more events to join the batch,
// unless something wants it committed now: a Sync or stop (kick), or a
// batch already full. w.mu is held on entry and exit, not while waiting.
func (w *Writer) lingerLocked() {
	if w.linger <= 0 || w.stopping || w.batchFullLocked() {
		return
	}
	w.mu.Unlock()
	w.lingerTimer.Reset(w.linger)
	select {
	case <-w.lingerTimer.C:
	case <-w.kick:
		w.lingerTimer.Stop()
	}
	w.mu.Lock()
}

// kickLocked ends the committer's linger, if it is lingering.
func (w *Writer) kickLocked() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// markStalled runs when a commit has taken stallAfter: from then until it
// completes, Admit refuses and Appends that find the queue full hold their
// events as counts instead of waiting.
func (w *Writer) markStalled() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight == 0 || w.stalled || w.err != nil {
		return
	}
	w.stalled = true
	slog.Warn("store: a write has not completed for "+stallAfter.String()+"; new flows and requests are refused and events are counted, not queued, until it does",
		"session", w.id, "dir", w.s.dir)
	w.room.Broadcast()
}

// failLocked records the first write error. The events of the failed batch
// and of the one being filled are lost; later Appends are counted as lost
// too. Everyone waiting is woken up to see the error.
func (w *Writer) failLocked(err error, inFlight int) {
	w.err = err
	w.lost += int64(inFlight + w.curN)
	w.curN = 0
	w.cur.Reset()
	slog.Error("store: writing events failed; the session's events are no longer recorded",
		"session", w.id, "err", err, "lost", w.lost)
	w.synced.Broadcast()
	w.room.Broadcast()
}

func (w *Writer) snapshotLocked() Session {
	s := w.meta
	s.Counts = w.counts
	s.Counts.Kinds = maps.Clone(w.counts.Kinds)
	s.Counts.Agent = maps.Clone(w.counts.Agent)
	s.Counts.Lost = w.lost + w.unstored
	s.Counts.Bytes = w.bytes
	s.Chain = &Chain{Seq: w.seq, Head: w.head}
	return s
}

func (w *Writer) errLocked() error {
	if w.err != nil {
		return fmt.Errorf("store: session %s: writing events failed, %d events not recorded: %w", w.id, w.lost, w.err)
	}
	if w.lost > 0 {
		return fmt.Errorf("store: session %s: %d events were appended after the session ended and not recorded", w.id, w.lost)
	}
	if w.unstored > 0 {
		return fmt.Errorf("store: session %s: %d events were counted but not stored (%s); the record says where, in its recording events",
			w.id, w.unstored, w.gapWhy())
	}
	return nil
}

// Err reports whether any appended event could not be recorded: the first
// write error, or events appended after End or Close. It does not wait.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errLocked()
}

// Sync returns once every event Appended before the call is durable (in the
// synced write-ahead log), with the session's record (its counts, its
// chain's head and seal) covering them, or with the error that prevents it.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.seq
	if w.recorded < target {
		w.recordDue = true
		w.kickLocked()
		w.work.Signal()
	}
	for (w.durable < target || w.recorded < target) && w.err == nil && w.cur != nil {
		w.synced.Wait()
	}
	return w.errLocked()
}

// stop refuses further events, lets the committer write and sync everything
// already appended, and waits for it to exit. It is idempotent.
func (w *Writer) stop() error {
	w.s.ending.Add(1)
	defer w.s.ending.Add(-1)
	w.mu.Lock()
	if !w.stopping && w.err == nil {
		w.flushGapAtEndLocked(time.Now())
	}
	w.stopping = true
	w.recordDue = true // the last batch carries the record up to date
	w.kickLocked()
	w.work.Broadcast()
	w.room.Broadcast()
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-w.s.broken: // the committer may never return: see Store.fatal
	}
	w.s.forget(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errLocked()
}

// End flushes and syncs the session's events, then records EndedAt (now),
// the exit code (nil when unknown) and the final counts. Events appended
// after End are not recorded (see Append). End returns the write error, if
// any, of this session; calling it twice is an error.
func (w *Writer) End(exitCode *int) error {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return fmt.Errorf("store: session %s already ended", w.id)
	}
	w.ended = true
	w.mu.Unlock()
	w.s.ending.Add(1) // through the end record's write, not only stop's
	defer w.s.ending.Add(-1)

	werr := w.stop()

	w.mu.Lock()
	sess := w.snapshotLocked()
	w.mu.Unlock()
	sess.EndedAt = time.Now().UTC()
	if exitCode != nil {
		c := *exitCode
		sess.ExitCode = &c
	}
	seal(&sess, w.s.opts.SealKey)
	rec := encodeSession(&sess)

	s := w.s
	if err := s.brokenError(); err != nil {
		return errors.Join(werr, fmt.Errorf("store: session %s: the store can no longer write (%v); the session is left without an end time, its synced events are kept", w.id, err))
	}
	if err := s.acquire(); err != nil {
		return errors.Join(werr, fmt.Errorf("store: session %s: the store was closed before End; the session is left without an end time: %w", w.id, err))
	}
	defer s.release()
	// The write runs on a goroutine of its own: on a disk that stays full
	// it fails after closeGrace, pebble calls Fatalf on the goroutine that
	// wrote, and fatal parks that goroutine, not End.
	done := make(chan error, 1)
	go func() { done <- s.db.Set(w.sessKey, rec, pebble.Sync) }()
	select {
	case err := <-done:
		if err != nil {
			return errors.Join(werr, fmt.Errorf("store: session %s: record the end of the session: %w", w.id, err))
		}
	case <-s.broken:
		return errors.Join(werr, fmt.Errorf("store: session %s: the store can no longer write (%v); the session is left without an end time, its synced events are kept", w.id, s.brokenErr))
	}
	return werr
}

// SetRefusal makes Admit refuse with why (wrapped in ErrNotRecording)
// until it is called with nil: for a part of the record outside the store
// that the session must not run without (an audit stream that is required
// and has fallen behind). Events are still appended.
func (w *Writer) SetRefusal(why error) {
	w.mu.Lock()
	w.refusal = why
	w.mu.Unlock()
}

// Seq is the sequence number of the last event appended (0: none yet);
// events up to it are readable once synced.
func (w *Writer) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// ErrNotRecording wraps every reason Admit gives for refusing: the caller
// must not start what it could not record.
var ErrNotRecording = errors.New("store: events cannot be recorded")

// Admit reports whether a new event can be recorded now. Callers that are
// about to let something happen — a flow, a request, a DNS answer — ask
// first and refuse when it returns an error (fail closed): nothing may
// happen that the record would miss. The error wraps ErrNotRecording and
// says why and what to do: a write failed, the session ended, a write has
// stalled, the session stored its byte budget, or the store's disk has less
// free space than the reserve. Admit admits again once a stall ends or
// space returns. It costs a lock and, at most every 100 ms, a statfs.
func (w *Writer) Admit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return fmt.Errorf("%w: session %s: writing to the store failed (%v); free space or fix the store's disk and start a new session", ErrNotRecording, w.id, w.err)
	case w.stopping:
		return fmt.Errorf("%w: session %s has ended", ErrNotRecording, w.id)
	case w.stalled:
		return fmt.Errorf("%w: session %s: a write to %s has not completed for %s (the disk is stalled or full); new flows and requests are refused until it does",
			ErrNotRecording, w.id, w.s.dir, stallAfter)
	case w.overBudget:
		return fmt.Errorf("%w: %s", ErrNotRecording, w.budgetMessage())
	case w.refusal != nil:
		return fmt.Errorf("%w: %w", ErrNotRecording, w.refusal)
	}
	now := time.Now()
	st, _ := w.s.disk.check(now, 0)
	w.noteDiskLocked(st, now)
	if st != diskOK {
		return fmt.Errorf("%w: %s", ErrNotRecording, w.s.disk.message(st))
	}
	return nil
}
