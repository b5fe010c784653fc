package tests

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// refusedPort returns a host loopback port nothing listens on.
func refusedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// blackholePort returns a host loopback port whose connects hang: a
// listener with a backlog of 1 that never accepts, its queue filled.
func blackholePort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(fd)
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the accept queue; every connect after these hangs in SYN-SENT.
	for i := 0; i < 4; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 300*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("the blackhole listener still completes handshakes")
	}
	return port
}

const timedConnect = `
import socket, sys, time
t0 = time.time()
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    r = "connected"
except ConnectionRefusedError:
    r = "refused"
except socket.timeout:
    r = "timeout"
except OSError as e:
    r = "error"
print(r, "%.2f" % (time.time() - t0))
`

func (e *env) timedConnect(host string, port int, timeout time.Duration) (string, float64) {
	e.t.Helper()
	out, err := e.python(timeout+10*time.Second, timedConnect, host, strconv.Itoa(port), fmt.Sprint(timeout.Seconds()))
	if err != nil {
		e.t.Fatalf("connect probe: %v\n%s", err, out)
	}
	var what string
	var secs float64
	fmt.Sscan(out, &what, &secs)
	return what, secs
}

// TestUpstreamRefusalIsARefusal: an allowed name whose upstream refuses the
// connection gives the guest a RST at once, never a connection that then
// closes, and an upstream-unreachable event that says why.
func TestUpstreamRefusalIsARefusal(t *testing.T) {
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["refuse.test:8080"]
[upstream]
resolve = { "refuse.test" = "127.0.0.1:%d" }
`, refusedPort(t)), envOptions{})
	if got, secs := e.timedConnect("refuse.test", 8080, 5*time.Second); got != "refused" || secs > 2 {
		t.Errorf("connect to refuse.test: %s after %.2fs, want refused at once", got, secs)
	}
	evs := e.stop()
	ev := netEvent(evs, func(n *store.Net) bool { return n.Domain == "refuse.test" })
	if ev == nil || ev.Decision != store.Denied || ev.Reason != "upstream-unreachable" || !strings.Contains(ev.Detail, "connection refused") {
		t.Errorf("event %+v, want denied upstream-unreachable naming the refusal\n%s", ev, dumpEvents(evs))
	}
}

// TestUpstreamBlackholeEndsInARST: an upstream that never answers the SYN
// holds the guest's SYN for --dial-timeout, then the guest gets a RST (not
// a hang until its own timeout) and the event says the dial timed out.
func TestUpstreamBlackholeEndsInARST(t *testing.T) {
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["hole.test:8080"]
[upstream]
resolve = { "hole.test" = "127.0.0.1:%d" }
`, blackholePort(t)), envOptions{extraArgs: []string{"--dial-timeout", "2s"}})
	got, secs := e.timedConnect("hole.test", 8080, 15*time.Second)
	if got != "refused" || secs < 1.5 || secs > 8 {
		t.Errorf("connect to hole.test: %s after %.2fs, want refused after the 2s dial timeout", got, secs)
	}
	evs := e.stop()
	ev := netEvent(evs, func(n *store.Net) bool { return n.Domain == "hole.test" })
	if ev == nil || ev.Decision != store.Denied || ev.Reason != "upstream-unreachable" ||
		!regexp.MustCompile(`timeout|deadline`).MatchString(ev.Detail) {
		t.Errorf("event %+v, want denied upstream-unreachable naming the timeout\n%s", ev, dumpEvents(evs))
	}
}

// resetAfter serves each connection: it writes n bytes, then resets the
// connection (SO_LINGER 0), as a crashing upstream does.
func resetAfter(t *testing.T, n int) int {
	t.Helper()
	return loopbackServer(t, func(c net.Conn) {
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Read(buf) // the request, whatever it is
		c.Write([]byte(strings.Repeat("x", n)))
		time.Sleep(200 * time.Millisecond)
		c.(*net.TCPConn).SetLinger(0)
	})
}

// loopbackServer serves each connection on a host loopback port with
// handle, which the connection is closed after, until the test ends; it
// returns the port.
func loopbackServer(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

const readUntilEnd = `
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
n = 0
try:
    while True:
        b = s.recv(65536)
        if not b:
            print("eof", n)
            break
        n += len(b)
except ConnectionResetError:
    print("reset", n)
except socket.timeout:
    print("timeout", n)
`

// TestUpstreamResetMidBodyResetsTheGuest: an upstream that resets the
// connection in the middle of a response must reset the guest's too. A
// clean end instead (what the splice did) tells the guest that a truncated
// close-delimited body is complete.
func TestUpstreamResetMidBodyResetsTheGuest(t *testing.T) {
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["reset.test:8080"]
[upstream]
resolve = { "reset.test" = "127.0.0.1:%d" }
`, resetAfter(t, 10000)), envOptions{})
	out, err := e.python(30*time.Second, readUntilEnd, "reset.test", "8080")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var how string
	var n int
	fmt.Sscan(out, &how, &n)
	if how != "reset" {
		t.Errorf("the guest saw %q after %d bytes, want a reset: the upstream reset mid-body", how, n)
	}
	evs := e.stop()
	ev := netEvent(evs, func(n *store.Net) bool { return n.Domain == "reset.test" })
	if ev == nil || ev.Decision != store.Allowed || !strings.Contains(ev.Detail, "reset") {
		t.Errorf("flow event %+v, want allowed with the upstream's reset in its detail\n%s", ev, dumpEvents(evs))
	}
}

// synFlood sends n SYNs from random source ports to dst:port on a raw
// socket, as fast as python can, without ever completing a handshake.
const synFlood = `
import os, random, socket, struct, sys
dst, port, n = socket.gethostbyname(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
src = "198.18.0.2"
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, 20)
ports = random.sample(range(10000, 60000), n)
for sport in ports:
    seq = random.getrandbits(32)
    h = struct.pack("!HHIIBBHHH", sport, port, seq, 0, 5 << 4, 0x02, 64240, 0, 0)
    h = h[:16] + struct.pack("!H", csum(pseudo + h)) + h[18:]
    s.sendto(h, (dst, 0))
print(dst)
`

// TestSYNFloodIsCountedAndCapsemStaysResponsive: a guest flooding SYNs at
// an allowed name whose upstream hangs fills the in-flight SYN cap; each
// SYN dropped at the cap is counted in a syn-cap event (a drop without a
// trace would hide the flood from the record), DNS keeps answering during
// the flood, and an allowed flow works once the held dials time out.
func TestSYNFloodIsCountedAndCapsemStaysResponsive(t *testing.T) {
	echo := newEchoServer(t)
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["hole.test:8080", "echo.test:8080"]
[upstream]
resolve = { "hole.test" = "127.0.0.1:%d", "echo.test" = "127.0.0.1:%d" }
`, blackholePort(t), echo.port()), envOptions{extraArgs: []string{"--dial-timeout", "3s"}})
	const n = 4000
	if out, err := e.python(60*time.Second, synFlood, "hole.test", "8080", strconv.Itoa(n)); err != nil {
		t.Fatalf("flood: %v\n%s", err, out)
	}
	start := time.Now()
	e.digA("echo.test") // DNS answers while every SYN slot is taken
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("DNS took %s during the SYN flood", d)
	}
	time.Sleep(4 * time.Second) // the held dials time out
	e.echoRoundTrip(echo, "echo.test", 8080, 64<<10)
	evs := e.stop()
	var capped int64
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Reason == "syn-cap" && ev.Net.Decision == store.Denied {
			capped += max(ev.Net.Count, 1)
		}
	}
	m := regexp.MustCompile(`syn_inflight_drops:(\d+)`).FindStringSubmatch(e.out.String())
	if m == nil {
		t.Fatalf("no syn_inflight_drops in capsem-net's stats:\n%s", e.out.String())
	}
	drops, _ := strconv.ParseInt(m[1], 10, 64)
	t.Logf("%d flood SYNs: %d dropped at the in-flight cap, %d counted in syn-cap events", n, drops, capped)
	if drops == 0 {
		t.Fatalf("the flood never reached the in-flight SYN cap (%d SYNs)", n)
	}
	if capped != drops {
		t.Errorf("syn-cap events count %d SYNs, gVisor dropped %d at the cap: every drop must be recorded", capped, drops)
	}
}
