package store

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// A gap is a run of events the Writer held as counts instead of storing
// them: while the disk was below its floor, while a commit had stalled with
// the queue full, or past the session's byte budget and its allowance. Only
// the count, the kinds and the span are kept (memory is bounded by the
// number of kinds), and the run becomes one RecordingUnstored event as
// soon as the store can write again, or at End.
type gap struct {
	n           int64
	kinds       map[Kind]int64
	first, last time.Time
	why         []string // the reasons, in order, each once
	ever        []string // every reason of the session, for Err
}

// Reasons for holding an event.
const (
	whyDisk    = "disk"
	whyStalled = "stalled"
	whyBudget  = "budget"
)

// refuseLocked decides whether an event of size bytes, appended at now,
// may be stored; it returns the reason to hold it instead, or "". On the
// way it records what changed on the disk and, when the store can write
// again, the gap before this event.
func (w *Writer) refuseLocked(now time.Time, size int64) string {
	st, _ := w.s.disk.check(now, size)
	w.noteDiskLocked(st, now)
	switch {
	case st == diskFull:
		return whyDisk
	case w.batchFullLocked(): // only when stalled: Append waits for room otherwise
		return whyStalled
	case w.budget > 0 && w.bytes >= w.budget+w.allowance:
		return whyBudget
	}
	if w.gap.n > 0 {
		w.flushGapLocked(now)
	}
	return ""
}

// noteDiskLocked records in the session's log a change of the disk's state
// since it last noted one: disk-low when free space fell below the reserve,
// resumed when it came back (after the gap, if events were held meanwhile).
// A full disk is noted by the gap itself, since nothing can be written then.
func (w *Writer) noteDiskLocked(st diskState, now time.Time) {
	if st == w.diskSeen {
		return
	}
	switch st {
	case diskFull:
		w.diskSeen = st
		return
	case diskLow:
		if w.gap.n > 0 {
			w.flushGapLocked(now)
		}
		w.putRecordingLocked(Recording{State: RecordingDiskLow, Detail: w.s.disk.message(diskLow)}, now)
	case diskOK:
		if w.gap.n > 0 {
			w.flushGapLocked(now)
		}
		w.putRecordingLocked(Recording{State: RecordingResumed,
			Detail: fmt.Sprintf("the disk holding %s has room again: recording and new flows resume", w.s.dir)}, now)
	}
	w.diskSeen = st
}

// holdLocked counts an event that is not stored, for reason why.
func (w *Writer) holdLocked(k Kind, why string, now time.Time) {
	g := &w.gap
	if g.n == 0 {
		g.first = now
		clear(g.kinds)
		g.why = g.why[:0]
	}
	if g.kinds == nil {
		g.kinds = map[Kind]int64{}
	}
	g.n++
	g.last = now
	g.kinds[k]++
	if !slices.Contains(g.why, why) {
		g.why = append(g.why, why)
	}
	if !slices.Contains(g.ever, why) {
		g.ever = append(g.ever, why)
		slog.Warn("store: events are counted, not stored", "session", w.id, "reason", w.whyText(why))
	}
	w.unstored++
}

// flushGapLocked writes the gap as one RecordingUnstored event and starts
// a new one.
func (w *Writer) flushGapLocked(now time.Time) {
	g := &w.gap
	kinds := make([]string, 0, len(g.kinds))
	for k, n := range g.kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	whys := make([]string, len(g.why))
	for i, why := range g.why {
		whys[i] = w.whyText(why)
	}
	detail := fmt.Sprintf("%d events not stored from %s to %s (%s): %s", g.n,
		g.first.UTC().Format(time.RFC3339Nano), g.last.UTC().Format(time.RFC3339Nano),
		strings.Join(kinds, ", "), strings.Join(whys, "; then "))
	n := g.n
	g.n = 0
	w.putRecordingLocked(Recording{State: RecordingUnstored, Count: n, Detail: detail}, now)
	slog.Warn("store: "+detail, "session", w.id)
}

// flushGapAtEndLocked writes the last gap when the session ends, unless the
// disk is full, in which case Counts.Lost alone says it.
func (w *Writer) flushGapAtEndLocked(now time.Time) {
	if w.gap.n == 0 {
		return
	}
	if st, _ := w.s.disk.check(now, 0); st == diskFull {
		return
	}
	w.flushGapLocked(now)
}

func (w *Writer) whyText(why string) string {
	switch why {
	case whyDisk:
		return fmt.Sprintf("the disk holding %s was full (less than %s free)", w.s.dir, FormatSize(int64(w.s.disk.floor)))
	case whyStalled:
		return fmt.Sprintf("writing to %s had stalled for more than %s", w.s.dir, stallAfter)
	case whyBudget:
		return fmt.Sprintf("the session had stored its limit of %s (--max-session-bytes) and %s more",
			FormatSize(w.budget), FormatSize(w.allowance))
	}
	return why
}

// gapWhy lists every reason events were held in this session, for errors.
func (w *Writer) gapWhy() string {
	whys := make([]string, len(w.gap.ever))
	for i, why := range w.gap.ever {
		whys[i] = w.whyText(why)
	}
	return strings.Join(whys, "; ")
}
