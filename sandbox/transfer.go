package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
)

// Files into and out of the guest. With a transfer disk
// (Config.TransferDisk, the guest's hypervisor.TransferDevice) the bytes
// go through it, two slots of transferSlot bytes used in turn: the host
// writes a slot of the file into the disk's file while the guest copies the
// other one out with dd, O_DIRECT on both of its sides, so that neither the
// guest's page cache nor its CPU copies the data (DMA by QEMU). A command
// in the guest drives it, told and answering over its stdin and stdout, and
// is recorded like any exec. Measured under TCG: the control channel
// carries ~55 MiB/s either way (QEMU reads its socket 4 KiB at a time),
// virtio-blk with O_DIRECT ~590 MiB/s. Without a transfer disk the bytes
// go through cat over the control channel.

// transferSlot is the size of one slot: big enough that the per-chunk
// round trip (~1 ms) is noise, small enough that the disk's file stays
// small (two slots).
const transferSlot = 32 << 20

// TransferDiskSize is the transfer disk's size: two slots.
const TransferDiskSize = 2 * transferSlot

// directAlign is the block dd moves with O_DIRECT: what chunks are padded
// to (the last chunk's padding is cut in the guest).
const directAlign = 1 << 20

// putScript copies the file in from the transfer disk: for each "SLOT N"
// line it appends N bytes of that slot (whole 1 MiB blocks, O_DIRECT on
// both sides; the last chunk's padding is cut at the end) and answers "ok".
// $1 the target, $2 its mode or "", $3 the total size, $4 the device, $5
// the slot size.
const putScript = `set -e
t="$1.capsem-part"
mkdir -p -- "$(dirname -- "$1")"
: > "$t"
# O_DIRECT where the target's filesystem has it (the root's ext4 does;
# tmpfs and 9p do not: there the guest's page cache takes the copy).
out=append
dd of="$t" oflag=append,direct conv=notrunc count=0 status=none 2>/dev/null && out=append,direct
while read -r slot n; do
  [ "$n" = 0 ] && break
  blocks=$(( (n + 1048575) / 1048576 ))
  dd if="$4" of="$t" bs=1M iflag=direct skip=$(( slot * $5 / 1048576 )) count=$blocks oflag=$out conv=notrunc status=none
  echo ok
done
truncate -s "$3" "$t"
if [ -n "$2" ]; then chmod -- "$2" "$t"; fi
mv -f -- "$t" "$1"
echo done`

// getScript copies the file out through the transfer disk: its size on
// the first line, then for each chunk "SLOT N" once the chunk is in the
// slot; before reusing a slot it waits for the host's "ack" of it.
// $1 the file, $2 the device, $3 the slot size.
const getScript = `set -e
[ -f "$1" ] || { echo "$1: no such regular file in the guest" >&2; exit 2; }
size=$(stat -L -c %s -- "$1")
echo "$size"
direct=
dd if="$1" of=/dev/null iflag=direct count=0 status=none 2>/dev/null && direct=,direct
off=0; i=0
while [ "$off" -lt "$size" ]; do
  slot=$(( i % 2 ))
  [ "$i" -ge 2 ] && read -r ack
  n=$(( size - off )); [ "$n" -gt "$3" ] && n=$3
  in=skip_bytes,count_bytes,fullblock
  [ $(( n % 1048576 )) -eq 0 ] && in=$in$direct  # O_DIRECT reads whole blocks only: not the file's tail
  dd if="$1" of="$2" bs=1M iflag=$in skip=$off count=$n seek=$(( slot * $3 / 1048576 )) oflag=direct conv=notrunc,sync status=none
  echo "$slot $n"
  off=$(( off + n )); i=$(( i + 1 ))
done`

// transfer is the host's side of the transfer disk.
type transfer struct {
	slot chan struct{} // one transfer at a time: held while one runs
	file *os.File
}

// MakeTransferDisk makes path a sparse file of TransferDiskSize: a
// transfer disk holds nothing between transfers.
func MakeTransferDisk(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("transfer disk: %w", err)
	}
	err = f.Truncate(TransferDiskSize)
	return errors.Join(err, f.Close())
}

func openTransfer(path string) (*transfer, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("transfer disk: %w", err)
	}
	return &transfer{slot: make(chan struct{}, 1), file: f}, nil
}

// take waits for the disk (another transfer may hold it) until ctx ends.
func (t *transfer) take(ctx context.Context) error {
	select {
	case t.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the transfer disk (another transfer holds it): %w", context.Cause(ctx))
	}
}

// give hands the disk back, its blocks released.
func (t *transfer) give() {
	t.release()
	<-t.slot
}

// transferStall bounds each wait of a transfer on the guest: a guest that
// makes no progress for this long (a line, a chunk, room for stdin) is
// given up, the session ended on the host's side and the transfer disk
// freed. Under TCG a 32 MiB slot takes well under a second either way
// (tmpfs and 9p, without O_DIRECT, ~2 s); a minute is a guest that stopped.
// Before this bound, and with the caller's ctx ignored once the command
// ran, a stalled guest held the disk — every later transfer waited — and
// the session's slot for ever.
var transferStall = time.Minute

// guard ends s when ctx does, or when a wait on the guest (between begin
// and end) lasts transferStall. stop releases it.
type guard struct {
	s     *proto.Session
	timer *time.Timer
	stop  func() bool
}

func newGuard(ctx context.Context, s *proto.Session) *guard {
	g := &guard{s: s}
	g.timer = time.AfterFunc(time.Hour, func() {
		s.Cancel(fmt.Errorf("the guest made no progress for %v", transferStall))
	})
	g.timer.Stop()
	g.stop = context.AfterFunc(ctx, func() { s.Cancel(context.Cause(ctx)) })
	return g
}

func (g *guard) begin() { g.timer.Reset(transferStall) }
func (g *guard) end()   { g.timer.Stop() }

// close releases the guard; the session is left as it is.
func (g *guard) close() {
	g.stop()
	g.timer.Stop()
}

// reader is r, each read of which is a wait on the guest. One guarded
// wait at a time: the guard has one timer.
func (g *guard) reader(r io.Reader) io.Reader { return &guardedReader{r, g} }

// writer is w, each write to which is a wait on the guest.
func (g *guard) writer(w io.Writer) io.Writer { return guardedWriter{w, g} }

// guardedReader is r, guarded by g (unguarded once g is nil).
type guardedReader struct {
	r io.Reader
	g *guard
}

func (r *guardedReader) Read(p []byte) (int, error) {
	if r.g == nil {
		return r.r.Read(p)
	}
	r.g.begin()
	defer r.g.end()
	return r.r.Read(p)
}

type guardedWriter struct {
	w io.Writer
	g *guard
}

func (w guardedWriter) Write(p []byte) (int, error) {
	w.g.begin()
	defer w.g.end()
	return w.w.Write(p)
}

func (t *transfer) close() error { return t.file.Close() }

// release gives the disk's blocks back to the host after a transfer: cut
// to nothing and grown back, it is sparse again (on any OS; no transfer
// is using it, and its size is the same after).
func (t *transfer) release() {
	_ = t.file.Truncate(0)
	_ = t.file.Truncate(TransferDiskSize)
}

// PutFile writes r to path in the guest (its directory made first; mode
// "" keeps the default), through the transfer disk when there is one,
// else over the control channel. The target appears whole or not at all.
func (sb *Sandbox) PutFile(ctx context.Context, path, mode string, size int64, r io.Reader) (int64, error) {
	if sb.xfer == nil || size < 0 {
		return sb.putOverChannel(ctx, path, mode, r)
	}
	t := sb.xfer
	if err := t.take(ctx); err != nil {
		return 0, err
	}
	defer t.give()
	s, err := sb.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", putScript, "capsem-put", path, mode,
		strconv.FormatInt(size, 10), hypervisor.TransferDevice, strconv.Itoa(transferSlot)}, Dir: "/"})
	if err != nil {
		return 0, err
	}
	g := newGuard(ctx, s)
	defer g.close()
	errText := collect(s.Stderr())
	acks := bufio.NewReader(g.reader(s.Stdout()))
	toGuest := g.writer(s)
	buf := make([]byte, transferSlot)
	var sent int64
	inFlight := 0
	fail := func(err error) (int64, error) {
		s.Cancel(err) // the guest's command is killed; the host waits for nothing
		return sent, fmt.Errorf("%w%s", err, errText())
	}
	for i := 0; ; i++ {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if inFlight == 2 { // the slot about to be written is still being copied
				if err := expectLine(acks, "ok"); err != nil {
					return fail(err)
				}
				inFlight--
			}
			slot := i % 2
			padded := (n + directAlign - 1) / directAlign * directAlign
			clear(buf[n:padded])
			if _, err := t.file.WriteAt(buf[:padded], int64(slot)*transferSlot); err != nil {
				return fail(fmt.Errorf("transfer disk: %w", err))
			}
			if _, err := fmt.Fprintf(toGuest, "%d %d\n", slot, n); err != nil {
				return fail(err)
			}
			inFlight++
			sent += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	if sent != size {
		return fail(fmt.Errorf("the body had %d bytes, %d announced", sent, size))
	}
	for ; inFlight > 0; inFlight-- {
		if err := expectLine(acks, "ok"); err != nil {
			return fail(err)
		}
	}
	if _, err := io.WriteString(toGuest, "0 0\n"); err != nil {
		return fail(err)
	}
	if err := expectLine(acks, "done"); err != nil {
		return fail(err)
	}
	g.begin()
	exit, err := s.Wait()
	g.end()
	if err != nil || exit.Code != 0 {
		return sent, fmt.Errorf("the guest could not write %s (exit %d, %v)%s", path, exit.Code, err, errText())
	}
	return sent, nil
}

// GetFile copies the guest's file at path out: open is called once with
// its size, and the bytes are written to what it returns.
func (sb *Sandbox) GetFile(ctx context.Context, path string, open func(size int64) (io.Writer, error)) (_ int64, err error) {
	if sb.xfer == nil {
		return sb.getOverChannel(ctx, path, open)
	}
	t := sb.xfer
	if err := t.take(ctx); err != nil {
		return 0, err
	}
	defer t.give()
	s, err := sb.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", getScript, "capsem-get", path,
		hypervisor.TransferDevice, strconv.Itoa(transferSlot)}, Dir: "/"})
	if err != nil {
		return 0, err
	}
	defer endSession(ctx, s, &err)
	g := newGuard(ctx, s)
	defer g.close()
	errText := collect(s.Stderr())
	lines := bufio.NewReader(g.reader(s.Stdout()))
	first, err := readLine(lines)
	size, perr := strconv.ParseInt(first, 10, 64)
	if err != nil || perr != nil || size < 0 {
		if gone := endedWith(s); gone != nil {
			return 0, fmt.Errorf("the guest did not send %s: %w", path, gone)
		}
		g.begin()
		_, _ = s.Wait()
		g.end()
		return 0, &NotFoundError{Msg: strings.TrimSpace(first + errText())}
	}
	w, err := open(size)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, transferSlot)
	var got int64
	for got < size {
		line, err := readLine(lines)
		if err != nil {
			if gone := endedWith(s); gone != nil {
				err = gone
			}
			return got, fmt.Errorf("the guest stopped sending %s after %d of %d bytes (%v)%s", path, got, size, err, errText())
		}
		slot, n, ok := parseChunk(line)
		if !ok || n > size-got || n == 0 {
			return got, fmt.Errorf("the guest's transfer of %s broke its protocol (%q)", path, line)
		}
		if _, err := t.file.ReadAt(buf[:n], int64(slot)*transferSlot); err != nil {
			return got, fmt.Errorf("transfer disk: %w", err)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return got, err
		}
		got += n
		// The ack is flow control only: the guest stops reading them once it
		// has sent its last chunk, and may be gone before the host has read
		// that chunk. A guest that is gone too early shows as a line missing.
		_, _ = io.WriteString(g.writer(s), "ack\n")
	}
	return got, nil
}

// NotFoundError is a GetFile of something that is not a readable regular
// file in the guest.
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string { return e.Msg }

// parseChunk reads "SLOT N" with SLOT 0 or 1 and N within a slot.
func parseChunk(line string) (slot int, n int64, ok bool) {
	a, b, found := strings.Cut(line, " ")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.Atoi(a)
	n, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || (s != 0 && s != 1) || n < 0 || n > transferSlot {
		return 0, 0, false
	}
	return s, n, true
}

// maxLine bounds a line the guest's transfer command sends.
const maxLine = 64

func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			return string(b), err
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) >= maxLine {
			return string(b), errors.New("line too long")
		}
		b = append(b, c)
	}
}

func expectLine(r *bufio.Reader, want string) error {
	l, err := readLine(r)
	if err != nil {
		return fmt.Errorf("the guest's copy ended early: %w", err)
	}
	if l != want {
		return fmt.Errorf("the guest's copy said %q, want %q", l, want)
	}
	return nil
}

// collect reads r to the end in the background (at most 64 KiB kept) and
// returns a func giving what it read, as "; the guest said: …" or "".
func collect(r io.Reader) func() string {
	var mu sync.Mutex
	var b strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			if b.Len() < 64<<10 {
				b.Write(buf[:n])
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if s := strings.TrimSpace(b.String()); s != "" {
			return "; the guest said: " + s
		}
		return ""
	}
}

// NotFound says the file was not there to get (see sandbox/api).
func (e *NotFoundError) NotFound() bool { return true }

// endedWith is the error s ended with, nil while it runs or if it exited.
func endedWith(s *proto.Session) error {
	select {
	case <-s.Done():
		_, err := s.Wait()
		return err
	default:
		return nil
	}
}

// endSession ends a transfer's command. After a transfer that went
// through, the command has one wait on the guest (transferStall, or until
// ctx ends) to exit by itself, so that its exit is on record; after a
// failure (the client went away, the guest broke the protocol), or then,
// it is killed in the guest and ended on the host's side at once, whether
// the guest answers or not.
func endSession(ctx context.Context, s *proto.Session, failed *error) {
	if *failed == nil {
		t := time.NewTimer(transferStall)
		defer t.Stop()
		select {
		case <-s.Done():
			return
		case <-t.C:
		case <-ctx.Done():
		}
	}
	s.Cancel(errors.New("the transfer ended"))
}
