package store

import (
	"crypto/ed25519"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a store opened for writing (OpenWith). The zero value
// is the defaults.
type Options struct {
	// MaxSessionBytes is the most a session may store: the bytes of its
	// events as encoded (keys and values, before pebble compresses them;
	// on disk a session takes about as much, see budget.go). Once a
	// session has stored that much, its Writer's Admit refuses (no new
	// flow or request may start) and only a small allowance more is
	// written — the refusals themselves — after which events are counted,
	// not stored (Counts.Lost, and a "recording" event at End). Zero
	// means DefaultMaxSessionBytes; negative, no limit.
	MaxSessionBytes int64

	// MinFreeDisk is the free space kept in reserve on the filesystem that
	// holds the store. Below it Admit refuses; below a quarter of it
	// events are not written but counted, until space returns (see
	// diskspace.go). Zero means DefaultMinFreeDisk; negative, the free
	// space is not watched (a write that meets a full disk still waits for
	// space rather than stop the process).
	MinFreeDisk int64

	// CommitLinger is how long the committer, woken by the first event of
	// a batch, waits for more before it commits and syncs them: a burst
	// of events (a request's, a flow's, an agent's tool loop) shares one
	// fsync instead of paying one each. A crash or power loss loses at
	// most the events of the last CommitLinger (and of the commit in
	// flight); Sync and End cut the wait short. Zero means
	// DefaultCommitLinger; negative, no linger: a batch is committed as
	// soon as its first event arrives.
	CommitLinger time.Duration

	// SealKey signs each session's hash chain head (chain.go) at every
	// commit and at End: the per-installation key kept beside the MITM's
	// CA (ca.LoadOrCreateSealKey). Nil means the chain is kept but not
	// signed, and readers report it as unsigned.
	SealKey ed25519.PrivateKey

	// freeSpace replaces statfs, and fs the filesystem pebble writes
	// through, in tests.
	freeSpace func(dir string) (uint64, error)
	fs        vfs.FS
}

// DefaultCommitLinger is the committer's wait for more events: 2 ms, a
// fraction of the fsync it saves (1–10 ms on this project's disks), short
// enough that a crash loses little. See docs/BENCHMARKS.md for what it
// buys the MITM's requests/s.
const DefaultCommitLinger = 2 * time.Millisecond

// commitLinger is o's linger, with zero meaning the default.
func (o Options) commitLinger() time.Duration {
	switch {
	case o.CommitLinger == 0:
		return DefaultCommitLinger
	case o.CommitLinger < 0:
		return 0
	}
	return o.CommitLinger
}

// DefaultMaxSessionBytes bounds what one session may store: 1 GiB. An
// agent's model call is its largest record — up to six 4 KiB previews
// (system prompt, request, text, thinking, tool arguments and results) plus
// its HTTP request's two body previews, ~40 KiB at most — so 1 GiB holds
// ~26,000 model calls, a day of an agent calling the model every 3 s
// without pause; flows (~0.2–9 KiB) and DNS answers (~0.1 KiB) add little
// beside them. A hostile guest that evaded every aggregation (33k denied
// queries/s, the rate one hostile guest was measured sending, ~5.8 MB/s) reaches
// it in ~3 minutes instead of filling the disk.
const DefaultMaxSessionBytes = 1 << 30

// DefaultMinFreeDisk is the free space the store keeps on its disk: 256
// MiB. Below it new flows are refused while the refusals are still
// recorded; below its quarter, 64 MiB, nothing more is written, which
// leaves pebble room for what it may still write on its own: a new
// write-ahead log, preallocated at 110 % of the memtable (4.4 MiB), and a
// memtable flushed to a table (4 MiB of memory, less once compressed), with
// room to spare for memtables up to 32 MiB. A write that meets a full
// disk regardless waits for space (diskWatch.enospc) rather than fail,
// since pebble stops for good on a failed log or manifest write.
const DefaultMinFreeDisk = 256 << 20

// ParseSize reads a size for MaxSessionBytes or MinFreeDisk as a user
// writes it: a number of bytes, optionally with a unit (K, M, G, T, as
// powers of 1024, with or without "iB"/"B": 512MiB, 1G, 64k); "0" for the
// default; "off" (or a negative number) for no limit or no watch.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "off") || strings.EqualFold(t, "none") {
		return -1, nil
	}
	num := strings.TrimRightFunc(t, unicode.IsLetter)
	unit := strings.ToUpper(strings.TrimSpace(t[len(num):]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	shift, ok := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	if err != nil || !ok || (n > 0 && n > math.MaxInt64>>shift) {
		return 0, fmt.Errorf("store: size %q: want a number of bytes with an optional unit (512MiB, 1GiB, 64k), 0 for the default, or off", s)
	}
	if n < 0 {
		return -1, nil
	}
	return n << shift, nil
}

// FormatSize writes n bytes for people, in ParseSize's units (powers of
// 1024) to a tenth: 512 B, 64.0 KiB, 1.5 GiB.
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
