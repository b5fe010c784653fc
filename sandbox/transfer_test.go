package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

// stalledGuest is a sandbox whose agent starts every command it is asked
// for and then reports nothing more — a guest that stalled (or guest root
// that took the agent's port) — while reading all the host sends. execs
// counts the commands started.
func stalledGuest(t *testing.T, disk bool) (sb *Sandbox, rec *memRecorder, execs *atomic.Int64) {
	t.Helper()
	a, h := net.Pipe()
	execs = new(atomic.Int64)
	go func() {
		c := proto.NewConn(a)
		if _, err := c.AgentHandshake(proto.Hello{Agent: "stalled", Window: 1 << 20}); err != nil {
			return
		}
		_ = c.Send(proto.Ready{})
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			if ex, ok := m.(proto.Exec); ok {
				execs.Add(1)
				_ = c.Send(proto.Started{ID: ex.ID, PID: 100 + int(ex.ID)})
			}
		}
	}()
	cl, err := proto.NewClient(context.Background(), h, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); a.Close() })
	log := slog.New(slog.DiscardHandler)
	rec = &memRecorder{}
	sb = &Sandbox{log: log, client: cl, guest: newGuestRecord(rec, log)}
	if disk {
		path := filepath.Join(t.TempDir(), "transfer.img")
		if err := writeSparse(path); err != nil {
			t.Fatal(err)
		}
		if sb.xfer, err = openTransfer(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.xfer.close() })
	}
	return sb, rec, execs
}

// writeSparse makes path a sparse file of TransferDiskSize, as the
// supervisor makes the transfer disk.
func writeSparse(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Truncate(TransferDiskSize), f.Close())
}

// execRecords counts the exec records.
func (m *memRecorder) execRecords() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ev := range m.evs {
		if ev.Exec != nil {
			n++
		}
	}
	return n
}

// A transfer whose guest stalls ends when its context does (the API's
// client went away), at once, and frees what it held: the transfer disk
// for the next transfer, and the command's session on the host (its exec
// record is written, exit -1). Before, GetFile and PutFile read ctx only
// until the command started: the stalled transfer held the disk and the
// session for ever, and every later transfer waited behind it.
func TestTransferEndsWithItsContext(t *testing.T) {
	for _, tc := range transferCases() {
		t.Run(tc.name, func(t *testing.T) {
			sb, rec, execs := stalledGuest(t, tc.disk)
			for i := 1; i <= 2; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
				start := time.Now()
				done := make(chan error, 1)
				go func() { done <- tc.call(ctx, sb) }()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "context canceled") {
						t.Fatalf("transfer %d ended with %v, want the context's cancellation", i, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("transfer %d to a stalled guest did not end 5 s after its context (%s)", i, tc.why)
				}
				cancel()
				t.Logf("transfer %d ended %v after it began (context cancelled at 200ms)", i, time.Since(start).Round(time.Millisecond))
				if got := execs.Load(); got != int64(i) {
					t.Fatalf("%d commands started for %d transfers: the second waited for the first's slot", got, i)
				}
			}
			sb.guest.wait()
			if n := rec.execRecords(); n != 2 {
				t.Errorf("%d exec records for the 2 cancelled transfers: their sessions did not end", n)
			}
		})
	}
}

// A transfer whose guest stalls and whose caller waits for ever ends
// after transferStall without progress.
func TestTransferStallDeadline(t *testing.T) {
	defer func(d time.Duration) { transferStall = d }(transferStall)
	transferStall = 300 * time.Millisecond
	for _, tc := range transferCases() {
		t.Run(tc.name, func(t *testing.T) {
			sb, _, _ := stalledGuest(t, tc.disk)
			done := make(chan error, 1)
			go func() { done <- tc.call(context.Background(), sb) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "no progress") {
					t.Fatalf("ended with %v, want the stall", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("a transfer to a stalled guest did not end 5 s after it began; the bound is %v without progress", transferStall)
			}
		})
	}
}

type transferCase struct {
	name string
	disk bool
	call func(ctx context.Context, sb *Sandbox) error
	why  string
}

func transferCases() []transferCase {
	get := func(ctx context.Context, sb *Sandbox) error {
		_, err := sb.GetFile(ctx, "/f", func(int64) (io.Writer, error) { return io.Discard, nil })
		return err
	}
	put := func(ctx context.Context, sb *Sandbox) error {
		_, err := sb.PutFile(ctx, "/f", "", 10, bytes.NewReader(make([]byte, 10)))
		return err
	}
	putStream := func(ctx context.Context, sb *Sandbox) error {
		_, err := sb.PutFile(ctx, "/f", "", -1, bytes.NewReader(make([]byte, 10)))
		return err
	}
	return []transferCase{
		{"get through the disk", true, get, "waiting for the size line"},
		{"put through the disk", true, put, "waiting for the chunk's ok"},
		{"get over the channel", false, get, "waiting for the size on stderr"},
		{"put over the channel", false, putStream, "waiting for the command's exit"},
	}
}
