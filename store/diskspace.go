package store

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The free space of the store's filesystem is read (statfs) at most every
// diskCheckEvery, or sooner once diskCheckBytes have been appended since the
// last reading: a statfs costs ~3 µs here (BenchmarkFreeSpace), so ten a
// second cost nothing, and at the fastest measured ingest (1.26M events/s
// of ~200 bytes, ~250 MB/s, docs/BENCHMARKS.md) 1 MiB goes by in 4 ms, so
// the reading is never more than a few MiB stale — far less than the floor
// it guards.
const (
	diskCheckEvery = 100 * time.Millisecond
	diskCheckBytes = 1 << 20
)

// diskState is what the store may do given the free space on its disk.
type diskState uint8

const (
	diskOK   diskState = iota // above the reserve: record and admit
	diskLow                   // below the reserve: record, but Admit refuses
	diskFull                  // below the floor, or pebble met ENOSPC: do not write; count
)

func (d diskState) String() string {
	return [...]string{"ok", "low", "full"}[d]
}

// freeSpace returns the bytes available to an unprivileged writer on the
// filesystem holding dir.
func freeSpace(dir string) (uint64, error) {
	u, err := vfs.Default.GetDiskUsage(dir)
	if err != nil {
		return 0, err
	}
	return u.AvailBytes, nil
}

// diskWatch follows the free space of the store's filesystem. Its methods
// are safe for concurrent use.
type diskWatch struct {
	dir     string
	free    func(dir string) (uint64, error)
	off     bool   // MinFreeDisk < 0: thresholds are not applied
	reserve uint64 // below it, Admit refuses
	floor   uint64 // below it, events are not written
	margin  uint64 // hysteresis: a state is left only this far above its threshold

	mu      sync.Mutex
	next    time.Time // no statfs before this
	pending int64     // bytes appended since the last statfs
	state   diskState
	forced  bool   // pebble met ENOSPC: full until space returns
	avail   uint64 // at the last statfs
	errLog  bool   // a statfs error was logged

	full atomic.Bool // state == diskFull, read without the lock by Append's wait
}

func newDiskWatch(dir string, minFree int64, free func(string) (uint64, error)) *diskWatch {
	if free == nil {
		free = freeSpace
	}
	d := &diskWatch{dir: dir, free: free}
	switch {
	case minFree < 0:
		d.off = true
		d.floor = 1 << 20 // what the ENOSPC wait waits for
	default:
		if minFree == 0 {
			minFree = DefaultMinFreeDisk
		}
		d.reserve = uint64(minFree)
		d.floor = d.reserve / 4
		d.margin = d.reserve / 16
	}
	return d
}

// check returns the disk state, reading the free space again when the last
// reading is older than diskCheckEvery or n bytes bring the bytes appended
// since then to diskCheckBytes.
func (d *diskWatch) check(now time.Time, n int64) (diskState, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending += n
	if now.Before(d.next) && d.pending < diskCheckBytes {
		return d.state, d.avail
	}
	d.refreshLocked(now)
	return d.state, d.avail
}

// refreshLocked reads the free space and moves between states, with a
// margin so that a disk hovering at a threshold does not flap.
func (d *diskWatch) refreshLocked(now time.Time) {
	d.next, d.pending = now.Add(diskCheckEvery), 0
	avail, err := d.free(d.dir)
	if err != nil {
		if !d.errLog {
			d.errLog = true
			slog.Warn("store: cannot read the free space of the store's disk; it is not watched", "dir", d.dir, "err", err)
		}
		if !d.forced {
			d.setLocked(diskOK)
		}
		return
	}
	d.avail = avail
	var want diskState
	switch {
	case d.off:
		want = diskOK
		if d.forced && avail < d.floor {
			want = diskFull
		}
	case avail < d.floor:
		want = diskFull
	case avail < d.reserve:
		want = diskLow
		if d.state == diskFull && avail < d.floor+d.margin {
			want = diskFull
		}
	default:
		want = diskOK
		if d.state != diskOK && avail < d.reserve+d.margin {
			want = diskLow
		}
	}
	if want != diskFull {
		d.forced = false
	}
	d.setLocked(want)
}

func (d *diskWatch) setLocked(s diskState) {
	if s == d.state {
		return
	}
	old := d.state
	d.state = s
	d.full.Store(s == diskFull)
	switch s {
	case diskLow:
		slog.Warn("store: "+d.lowMessage(), "dir", d.dir, "free", d.avail, "reserve", d.reserve)
	case diskFull:
		slog.Warn("store: "+d.fullMessage(), "dir", d.dir, "free", d.avail, "floor", d.floor)
	default:
		slog.Info("store: the disk holding the store has room again; recording and new flows resume",
			"dir", d.dir, "free", d.avail, "was", old.String())
	}
}

// lowMessage and fullMessage say what is wrong and what to do.
func (d *diskWatch) lowMessage() string {
	return fmt.Sprintf("the disk holding %s has %s free, less than the %s kept in reserve (--min-free-disk): "+
		"new flows and requests are refused until space is freed on that disk", d.dir, FormatSize(int64(d.avail)), FormatSize(int64(d.reserve)))
}

func (d *diskWatch) fullMessage() string {
	if d.forced {
		return fmt.Sprintf("the disk holding %s is full: events are counted, not written, and new flows and requests are refused "+
			"until space is freed on that disk", d.dir)
	}
	return fmt.Sprintf("the disk holding %s has %s free, less than %s (a quarter of the --min-free-disk reserve): events are "+
		"counted, not written, and new flows and requests are refused until space is freed on that disk", d.dir, FormatSize(int64(d.avail)), FormatSize(int64(d.floor)))
}

// message is the reason Admit gives in state s.
func (d *diskWatch) message(s diskState) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s == diskFull {
		return d.fullMessage()
	}
	return d.lowMessage()
}

// room reports whether n more bytes fit above the reserve, reading the
// free space afresh: a write of that size (Import's one batch) is refused
// up front rather than let it fill the disk.
func (d *diskWatch) room(n uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refreshLocked(time.Now())
	if d.off || d.avail >= d.reserve+n {
		return nil
	}
	return fmt.Errorf("the disk holding %s has %s free; %s more would leave less than the %s kept in reserve (--min-free-disk): free space on that disk",
		d.dir, FormatSize(int64(d.avail)), FormatSize(int64(n)), FormatSize(int64(d.reserve)))
}

// writable reports whether the store may be opened to write: pebble's Open
// replays the write-ahead log into a table, and a disk below the floor
// (1 MiB when thresholds are off) would leave that write waiting on ENOSPC
// with no session to give up for.
func (d *diskWatch) writable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refreshLocked(time.Now())
	if d.state != diskFull && d.avail >= d.floor || d.errLog {
		return nil
	}
	floor := "the 1.0 MiB a store needs to open for writing"
	if !d.off {
		floor = fmt.Sprintf("%s (a quarter of the --min-free-disk reserve)", FormatSize(int64(d.floor)))
	}
	return fmt.Errorf("the disk holding %s has %s free, less than %s: free space on that disk", d.dir, FormatSize(int64(d.avail)), floor)
}

// enospc is pebble's disk-full callback (vfs.OnDiskFull): a write met
// ENOSPC. Every write of the store waits while it runs, and the one that
// failed is retried once when it returns, so it returns only once there is
// room again — or, when the store is ending (giveUp reports true), after
// giving the disk grace to free up, so that End and Close cannot wait
// forever. Meanwhile the state is full: Admit refuses and Append counts
// events rather than queue them (see Writer.Append); wake tells the writers
// waiting for room in the queue, which will not come while this write
// waits.
func (d *diskWatch) enospc(giveUp func() bool, grace time.Duration, wake func()) {
	d.mu.Lock()
	d.forced = true
	d.avail = 0
	d.setLocked(diskFull)
	d.mu.Unlock()
	wake()
	var ending time.Time
	for {
		time.Sleep(diskCheckEvery)
		d.mu.Lock()
		d.refreshLocked(time.Now())
		full := d.state == diskFull
		d.mu.Unlock()
		if !full {
			return
		}
		if giveUp() {
			if ending.IsZero() {
				ending = time.Now()
			} else if time.Since(ending) >= grace {
				slog.Error("store: the disk is still full and the store is closing: the last events cannot be written", "dir", d.dir)
				return
			}
		}
	}
}
