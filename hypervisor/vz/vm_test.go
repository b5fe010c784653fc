package vz

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsem/capsem/hypervisor"
)

func init() {
	dialRetry = 20 * time.Millisecond
	dialStall = 500 * time.Millisecond
	exitDrain = 300 * time.Millisecond
}

// fakeMachine stands in for the framework: a guest that starts listening
// on vsock when told to and powers off when told to.
type fakeMachine struct {
	listening    atomic.Bool
	honorRequest bool // power off on requestStop
	guest        chan net.Conn
	// pair makes the host and guest ends of one accepted connection.
	pair func() (host, guest net.Conn)

	stopped  chan struct{}
	stopOnce sync.Once
	exitErr  error

	dials, requested, forced, released atomic.Int32

	// The snapshot side (snapshot_test.go): what was called, in order,
	// and what the calls return.
	smu                  sync.Mutex
	calls                []string
	pauseErr, restoreErr error
	saved                []byte // what saveState writes
}

func newFake() *fakeMachine {
	return &fakeMachine{
		guest:   make(chan net.Conn, 4),
		stopped: make(chan struct{}),
		pair:    func() (net.Conn, net.Conn) { return net.Pipe() },
	}
}

func (f *fakeMachine) powerOff(err error) {
	f.stopOnce.Do(func() { f.exitErr = err; close(f.stopped) })
}

func (f *fakeMachine) start() error { f.call("start"); return nil }

func (f *fakeMachine) call(what string) {
	f.smu.Lock()
	f.calls = append(f.calls, what)
	f.smu.Unlock()
}

func (f *fakeMachine) called() []string {
	f.smu.Lock()
	defer f.smu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeMachine) pause() error  { f.call("pause"); return f.pauseErr }
func (f *fakeMachine) resume() error { f.call("resume"); return nil }
func (f *fakeMachine) saveState(path string) error {
	f.call("save")
	// Like the framework: a new file, mode from the umask.
	return os.WriteFile(path, f.saved, 0o644)
}
func (f *fakeMachine) restoreState(path string) error {
	f.call("restore " + filepath.Base(path))
	return f.restoreErr
}
func (f *fakeMachine) wait() error { <-f.stopped; return f.exitErr }
func (f *fakeMachine) requestStop() error {
	f.requested.Add(1)
	if f.honorRequest {
		go f.powerOff(nil)
	}
	return nil
}
func (f *fakeMachine) forceStop() error { f.forced.Add(1); f.powerOff(nil); return nil }
func (f *fakeMachine) release()         { f.released.Add(1) }
func (f *fakeMachine) dialControl() (net.Conn, error) {
	f.dials.Add(1)
	select {
	case <-f.stopped:
		return nil, errors.New("VM stopped")
	default:
	}
	if !f.listening.Load() {
		return nil, errors.New("connection reset by peer")
	}
	h, g := f.pair()
	f.guest <- g
	return h, nil
}

func testConfig(t *testing.T) hypervisor.Config {
	t.Helper()
	k := filepath.Join(t.TempDir(), "Image")
	if err := os.WriteFile(k, []byte("not a kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hypervisor.Config{Kernel: k, BootTimeout: 10 * time.Second}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestVM(t *testing.T, cfg hypervisor.Config, opts Options, f *fakeMachine) *VM {
	t.Helper()
	opts.Logger = quiet()
	v, err := newVM(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	v.build = func() (machine, error) { return f, nil }
	return v
}

func TestControlConnectsLazily(t *testing.T) {
	f := newFake()
	v := newTestVM(t, testConfig(t), Options{}, f)
	if v.Control() != nil {
		t.Fatal("Control before Start is not nil")
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctl := v.Control()
	// The host writes before the guest listens: the write waits.
	wrote := make(chan error, 1)
	go func() { _, err := ctl.Write([]byte("ping")); wrote <- err }()
	time.Sleep(150 * time.Millisecond)
	if n := f.dials.Load(); n < 2 {
		t.Fatalf("%d dials while the guest was not listening, want retries", n)
	}
	select {
	case <-v.Booted():
		t.Fatal("booted before the guest spoke")
	default:
	}
	f.listening.Store(true)
	guestDone := make(chan error, 1)
	go func() {
		g := <-f.guest
		defer g.Close()
		if _, err := g.Write([]byte("hello")); err != nil {
			guestDone <- err
			return
		}
		b := make([]byte, 4)
		if _, err := io.ReadFull(g, b); err != nil || string(b) != "ping" {
			guestDone <- errors.New("guest read " + string(b))
			return
		}
		_, err := g.Write([]byte("pong"))
		guestDone <- err
	}()
	b := make([]byte, 5)
	if _, err := io.ReadFull(ctl, b); err != nil || string(b) != "hello" {
		t.Fatalf("host read %q, %v", b, err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := io.ReadFull(ctl, b[:4]); err != nil || string(b[:4]) != "pong" {
		t.Fatalf("host read %q, %v", b[:4], err)
	}
	if err := <-guestDone; err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.Booted():
	default:
		t.Fatal("Booted not closed after the guest spoke")
	}
	f.powerOff(nil)
	if err := v.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if f.released.Load() != 1 {
		t.Fatalf("released %d times", f.released.Load())
	}
	if err := v.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func TestBootTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.BootTimeout = 200 * time.Millisecond
	f := newFake()
	v := newTestVM(t, cfg, Options{}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := v.Wait()
	if !errors.Is(err, hypervisor.ErrBootTimeout) {
		t.Fatalf("Wait: %v, want ErrBootTimeout", err)
	}
	if f.forced.Load() != 1 {
		t.Fatalf("forced %d times", f.forced.Load())
	}
	// Nobody ever connected: reads end, writes say why.
	if n, err := v.Control().Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after exit: %d, %v", n, err)
	}
	if _, err := v.Control().Write([]byte("x")); !errors.Is(err, errVMExited) {
		t.Fatalf("Write after exit: %v", err)
	}
}

func TestGuestWordStopsBootTimerWithoutReader(t *testing.T) {
	cfg := testConfig(t)
	cfg.BootTimeout = 300 * time.Millisecond
	f := newFake()
	f.listening.Store(true)
	v := newTestVM(t, cfg, Options{}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := <-f.guest
	defer g.Close()
	if _, err := g.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	f.powerOff(nil)
	if err := v.Wait(); err != nil {
		t.Fatalf("Wait: %v (the timer fired although the guest spoke)", err)
	}
	b, err := io.ReadAll(v.Control())
	if string(b) != "x" || err != nil {
		t.Fatalf("control after exit: %q, %v", b, err)
	}
}

func TestReadsDrainAfterExit(t *testing.T) {
	f := newFake()
	f.listening.Store(true)
	f.pair = func() (net.Conn, net.Conn) {
		h, vmEnd, err := hypervisor.SocketPair()
		if err != nil {
			panic(err)
		}
		g, err := net.FileConn(vmEnd)
		vmEnd.Close()
		if err != nil {
			panic(err)
		}
		return h, g
	}
	v := newTestVM(t, testConfig(t), Options{}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := <-f.guest
	defer g.Close() // the framework leaves its end open
	if _, err := g.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	<-v.Booted()
	if _, err := g.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	f.powerOff(nil)
	if err := v.Wait(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := io.ReadAll(v.Control())
	if string(b) != "hello bye" || err != nil {
		t.Fatalf("control: %q, %v", b, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("reads took %v to end after the VM exited", d)
	}
}

func TestStopForcesAfterGrace(t *testing.T) {
	f := newFake()
	v := newTestVM(t, testConfig(t), Options{StopGrace: 100 * time.Millisecond}, f)
	if err := v.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := v.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.requested.Load() != 1 || f.forced.Load() != 1 {
		t.Fatalf("requested %d, forced %d; want 1, 1", f.requested.Load(), f.forced.Load())
	}
	if err := v.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if err := v.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStopHonoured(t *testing.T) {
	f := newFake()
	f.honorRequest = true
	v := newTestVM(t, testConfig(t), Options{StopGrace: -1}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := v.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.forced.Load() != 0 {
		t.Fatal("forced although the guest powered off when asked")
	}
	if err := v.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestStopContextForces(t *testing.T) {
	f := newFake()
	v := newTestVM(t, testConfig(t), Options{StopGrace: -1}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := v.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if f.forced.Load() != 1 {
		t.Fatalf("forced %d times", f.forced.Load())
	}
	if err := v.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestContextCancelStops(t *testing.T) {
	f := newFake()
	v := newTestVM(t, testConfig(t), Options{}, f)
	ctx, cancel := context.WithCancel(context.Background())
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := v.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	if f.forced.Load() != 1 {
		t.Fatalf("forced %d times", f.forced.Load())
	}
}

func TestErrorState(t *testing.T) {
	cfg := testConfig(t)
	cfg.ConsoleLog = "/tmp/console.log"
	f := newFake()
	v := newTestVM(t, cfg, Options{}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.powerOff(errors.New("error state"))
	err := v.Wait()
	if err == nil || !strings.Contains(err.Error(), "error state") || !strings.Contains(err.Error(), "/tmp/console.log") {
		t.Fatalf("Wait: %v", err)
	}
}

func TestNewVMErrors(t *testing.T) {
	if _, err := newVM(hypervisor.Config{}, Options{}); err == nil {
		t.Fatal("accepted a config without a kernel")
	}
	if _, err := newVM(testConfig(t), Options{MTU: 1000}); err == nil {
		t.Fatal("accepted MTU 1000")
	}
	v, err := newVM(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(); err == nil {
		t.Fatal("Wait before Start succeeded")
	}
	if err := v.Start(context.Background()); !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Start without a machine builder: %v", err)
	}
}
