package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// procStatusKiB reads a "VmRSS:"-style line of /proc/PID/status, in KiB.
func procStatusKiB(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %q", pid, key, line)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, key)
	return 0
}

// holdDNSOverTCP opens n TCP connections to dst:53, each with a 4 KiB
// receive buffer (a guest that reads nothing), and pipelines per queries
// for a 253-byte name on each without ever reading an answer. It prints
// "held CONNECTED REFUSED BYTES" once no connection makes progress, then
// keeps every connection open until stdin closes.
const holdDNSOverTCP = `
import resource, select, socket, struct, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
dst, n, per, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
labels = [b"a" * 63] * 3 + [b"b" * 61]
name = b"".join(bytes([len(l)]) + l for l in labels) + b"\x00"
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)
payload = (struct.pack(">H", len(q)) + q) * per
socks = {}
poller = select.poll()
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    s.connect_ex((dst, 53))
    socks[s.fileno()] = [s, 0]
    poller.register(s, select.POLLOUT)
connected, refused, sent = set(), 0, 0
active = set(socks)
start = last = time.time()
while active and time.time() - start < limit and time.time() - last < 3:
    for fd, ev in poller.poll(200):
        s, off = socks[fd]
        if ev & (select.POLLERR | select.POLLHUP):
            poller.unregister(fd)
            active.discard(fd)
            if fd not in connected:
                refused += 1
            continue
        connected.add(fd)
        try:
            k = s.send(payload[off:off + 65536])
        except BlockingIOError:
            continue
        except OSError:
            poller.unregister(fd)
            active.discard(fd)
            continue
        socks[fd][1] = off + k
        sent += k
        last = time.time()
        if off + k >= len(payload):
            poller.unregister(fd)
            active.discard(fd)
print("held", len(connected), refused, sent, flush=True)
sys.stdin.read()
`

// TestDNSOverTCPMemoryIsBounded: uncapped, 1,500 TCP/53 connections
// pipelining queries while the guest never reads added 1.7 GiB to
// capsem-net. TCP/53 connections are capped per guest, each holds
// one answer at a time in small buffers, and those beyond the cap are
// refused with an event.
func TestDNSOverTCPMemoryIsBounded(t *testing.T) {
	e := startEnv(t, "", envOptions{}) // deny all: every query is NXDOMAIN
	pid := e.cmd.Process.Pid
	base := procStatusKiB(t, pid, "VmRSS")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := e.ns.Command(ctx, "python3", "-c", holdDNSOverTCP, "198.18.0.1", "1500", "200", "60")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the guest program ended early: %v", err)
	}
	var connected, refused, sent int64
	if _, err := fmt.Sscanf(line, "held %d %d %d", &connected, &refused, &sent); err != nil {
		t.Fatalf("guest output %q: %v", line, err)
	}
	time.Sleep(time.Second) // let capsem-net take in whatever is still in flight
	rss := procStatusKiB(t, pid, "VmRSS")
	hwm := procStatusKiB(t, pid, "VmHWM")
	stdin.Close()
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	t.Logf("1500 TCP/53 connections: %d connected, %d refused, %d query bytes sent; capsem-net RSS %d MiB before, %d MiB while held, peak %d MiB",
		connected, refused, sent, base>>10, rss>>10, hwm>>10)
	if grown := hwm - base; grown > 100<<10 {
		t.Errorf("capsem-net grew by %d MiB (peak %d MiB over %d MiB before) holding 1500 pipelining TCP/53 connections; want < 100 MiB", grown>>10, hwm>>10, base>>10)
	}
	if connected+refused != 1500 {
		t.Errorf("%d connected + %d refused of 1500: every connection must be answered, by a handshake or a RST", connected, refused)
	}
	evs := e.stop()
	var capped int64
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Reason == "dns-tcp-cap" && ev.Net.Decision == store.Denied {
			capped += max(ev.Net.Count, 1)
		}
	}
	if capped == 0 || capped < refused {
		t.Errorf("dns-tcp-cap events count %d refused connections, the guest saw %d refused\n%s", capped, refused, dumpEvents(evs[:min(len(evs), 200)]))
	}
}

// burstNames asks for n distinct names under suffix over UDP, in batches,
// and prints how many answers came back with each RCODE.
const burstNames = `
import os, select, socket, struct, sys, time
n, suffix = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
s.connect(("198.18.0.1", 53))
tag = os.urandom(4).hex()
codes = {}
def query(i):
    name = ("r%d-%s.%s" % (i, tag, suffix)).encode()
    q = b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\x00"
    return struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", 1, 1)
i = 0
while i < n:
    batch = min(128, n - i)
    for j in range(batch):
        s.send(query(i + j))
    i += batch
    got, deadline = 0, time.time() + 1
    while got < batch and time.time() < deadline:
        r, _, _ = select.select([s], [], [], max(0, deadline - time.time()))
        if not r:
            break
        rc = s.recv(2048)[3] & 0xf
        codes[rc] = codes.get(rc, 0) + 1
        got += 1
print(" ".join("%d=%d" % kv for kv in sorted(codes.items())))
`

// TestWildcardNameBurstLeavesAllowedNamesWorking: with a wildcard
// allowed, ~66k made-up names would use up the fake-DNS pool for the life
// of the process, and then even an explicitly allowed name would get
// SERVFAIL. Wildcard names are capped per session (NXDOMAIN beyond
// [dns] max_wildcard_names, with an event) and exact names keep room.
func TestWildcardNameBurstLeavesAllowedNamesWorking(t *testing.T) {
	echo := newEchoServer(t)
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["*.wild.test:8080", "allowed.test:8080"]
[upstream]
resolve = { "allowed.test" = "127.0.0.1:%d" }
`, echo.port()), envOptions{})
	out, err := e.python(240*time.Second, burstNames, "70000", "wild.test")
	if err != nil {
		t.Fatalf("burst: %v\n%s", err, out)
	}
	codes := map[int]int{}
	for _, f := range strings.Fields(out) {
		var rc, n int
		fmt.Sscanf(f, "%d=%d", &rc, &n)
		codes[rc] = n
	}
	t.Logf("70000 names under *.wild.test: answers by RCODE %v", codes)
	if codes[0] > 4096 || codes[0] < 4000 {
		t.Errorf("%d names under *.wild.test got an address; want the default cap, 4096 (a few may be lost in the burst)", codes[0])
	}
	if codes[2] != 0 {
		t.Errorf("%d SERVFAIL answers: the pool must never run out under the cap", codes[2])
	}
	a := e.digA("allowed.test")
	e.echoRoundTrip(echo, a.String(), 8080, 64<<10)
	evs := e.stop()
	var capped int64
	for _, ev := range evs {
		if ev.DNS != nil && ev.DNS.Reason == "wildcard-name-cap" && ev.DNS.Decision == store.Denied && ev.DNS.Answer == "NXDOMAIN" {
			capped += max(ev.DNS.Count, 1)
		}
	}
	if capped < int64(codes[3]) || capped == 0 {
		t.Errorf("wildcard-name-cap events count %d names, the guest got %d NXDOMAIN", capped, codes[3])
	}
}

// connectMany connects to host:port n times, one after the other, and
// prints how many connections were refused.
const connectMany = `
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
refused = 0
for i in range(n):
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        refused += 1
print(refused)
`

// TestDeniedFlowFloodIsAggregated: one event per denied SYN would let a
// guest grow the store without bound. Repeated denials are recorded like the drop log's: a burst each second, then
// one event whose count stands for the rest, and nothing goes uncounted.
func TestDeniedFlowFloodIsAggregated(t *testing.T) {
	e := startEnv(t, "", envOptions{})
	const n = 3000
	out, err := e.python(120*time.Second, connectMany, "203.0.113.10", "443", strconv.Itoa(n))
	if err != nil || strings.TrimSpace(out) != strconv.Itoa(n) {
		t.Fatalf("want all %d connects refused: %v %s", n, err, out)
	}
	evs := e.stop()
	rows, total := 0, int64(0)
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Reason == "direct-ip" {
			rows++
			total += max(ev.Net.Count, 1)
		}
	}
	t.Logf("%d denied SYNs: %d events", n, rows)
	if total != n {
		t.Errorf("direct-ip events count %d denied SYNs, the guest made %d", total, n)
	}
	if rows > n/4 {
		t.Errorf("%d events for %d denied SYNs: repeated denials must be aggregated", rows, n)
	}
}

// dhcpFlood sends n DHCPDISCOVERs from tap0's MAC on a raw socket, in
// bursts of 100 with a 2 ms pause: an unpaced burst on a loaded machine
// lost half its frames in the TAP (997 offers for 2,000 in a CI-like run),
// and the test is about the events, not the TAP's queue.
const dhcpFlood = `
import socket, struct, sys, time
n = int(sys.argv[1])
mac = bytes.fromhex(open("/sys/class/net/tap0/address").read().strip().replace(":", ""))
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
bootp = struct.pack("!BBBBIHH4s4s4s4s16s64s128sI", 1, 1, 6, 0, 0x1234, 0, 0, bytes(4), bytes(4), bytes(4), bytes(4), mac + bytes(10), bytes(64), bytes(128), 0x63825363)
bootp += bytes([53, 1, 1, 255])
udp = struct.pack("!HHHH", 68, 67, 8 + len(bootp), 0) + bootp
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes(4), b"\xff" * 4)
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
frame = b"\xff" * 6 + mac + b"\x08\x00" + ip + udp
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("tap0", 0))
for i in range(n):
    s.send(frame)
    if i % 100 == 99:
        time.sleep(0.002)
print("sent")
`

// TestDHCPFloodIsAggregated: one event per DHCP message was another way to
// grow the store; offers are now recorded like drops, counted exactly.
func TestDHCPFloodIsAggregated(t *testing.T) {
	e := startEnv(t, "", envOptions{})
	const n = 2000
	if out, err := e.python(60*time.Second, dhcpFlood, strconv.Itoa(n)); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	evs := e.stop()
	rows, total := 0, int64(0)
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Reason == "dhcp-offer" {
			rows++
			total += max(ev.Net.Count, 1)
		}
	}
	t.Logf("%d DHCPDISCOVERs: %d dhcp-offer events for %d offers", n, rows, total)
	if rows > n/4 {
		t.Errorf("%d dhcp-offer events for %d DISCOVERs: repeated DHCP messages must be aggregated", rows, n)
	}
	// The TAP may drop some of a burst; every offer made is counted.
	if total < n/2 || total > n+1 {
		t.Errorf("dhcp-offer events count %d offers for %d DISCOVERs (and the lease's)", total, n)
	}
}

// oddName sends one A query whose single label holds ESC, BEL, a newline
// and a backslash: the bytes of a terminal-title escape and a forged row.
const oddName = `
import socket, struct
label = b"x\x1b]0;pwned\x07\n\x1b[8m\\y\xff"
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + bytes([len(label)]) + label + b"\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(q, ("198.18.0.1", 53))
print(s.recv(2048)[3] & 0xf)
`

// TestQueryNamesAreStoredEscaped: a query name is the guest's bytes;
// stored raw, ESC, BEL and newlines in it would rewrite the terminal of
// whoever reads the record. It is stored in RFC 1035
// presentation form: \DDD for a byte that is not printable ASCII, \\ for a
// backslash.
func TestQueryNamesAreStoredEscaped(t *testing.T) {
	e := startEnv(t, "[network]\nallow = [\"*.y\"]\n", envOptions{})
	out, err := e.python(10*time.Second, oddName)
	if err != nil || strings.TrimSpace(out) != "3" {
		t.Errorf("the odd name got RCODE %q (%v), want 3 (NXDOMAIN: not a valid host name)", out, err)
	}
	evs := e.stop()
	const want = `x\027]0;pwned\007\010\027[8m\\y\255`
	ev := dnsEvent(evs, func(d *store.DNS) bool { return strings.Contains(d.QName, "pwned") })
	if ev == nil {
		t.Fatalf("no DNS event for the odd name:\n%s", dumpEvents(evs))
	}
	if ev.QName != want || ev.Decision != store.Denied || ev.Reason != "invalid-name" {
		t.Errorf("event qname %q decision %s reason %s; want %q, denied, invalid-name", ev.QName, ev.Decision, ev.Reason, want)
	}
}

// TestDNSAnswerNamesTheRCode: the schema promises dns_events.answer says
// what the guest got, so a denied name's answer is "NXDOMAIN", not empty
// (NULL in the export).
func TestDNSAnswerNamesTheRCode(t *testing.T) {
	e, _ := startBasic(t, envOptions{}, "")
	e.digStatus("A", "denied.test", "@198.18.0.1")
	e.digStatus("AAAA", "allowed.test", "@198.18.0.1")
	e.digStatus("-c", "CH", "-t", "TXT", "version.bind", "@198.18.0.1")
	evs := e.stop()
	for _, c := range []struct{ qname, qtype, answer string }{
		{"denied.test", "A", "NXDOMAIN"},
		{"allowed.test", "AAAA", "NOERROR"},
		{"version.bind", "TXT", "REFUSED"},
	} {
		if dnsEvent(evs, func(d *store.DNS) bool {
			return d.QName == c.qname && d.QType == c.qtype && d.Answer == c.answer
		}) == nil {
			t.Errorf("no event for %s %s with answer %s:\n%s", c.qtype, c.qname, c.answer, dumpEvents(evs))
		}
	}
}

// holdConnections opens n connections to host:port at once and keeps them
// open; it prints how many connected and how many were refused.
const holdConnections = `
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, refused = [], 0
for i in range(n):
    try:
        held.append(socket.create_connection((host, port), timeout=5))
    except ConnectionRefusedError:
        refused += 1
print(len(held), refused)
`

// TestEstablishedFlowsAreCapped: --max-flows caps the guest's open flows;
// beyond it a SYN gets a RST and a flow-cap event.
func TestEstablishedFlowsAreCapped(t *testing.T) {
	echo := newEchoServer(t)
	e := startEnv(t, fmt.Sprintf(`[network]
allow = ["echo.test:8080"]
[upstream]
resolve = { "echo.test" = "127.0.0.1:%d" }
`, echo.port()), envOptions{extraArgs: []string{"--max-flows", "20"}})
	out, err := e.python(60*time.Second, holdConnections, "echo.test", "8080", "30")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var held, refused int
	fmt.Sscan(out, &held, &refused)
	if held != 20 || refused != 10 {
		t.Errorf("30 connections with --max-flows 20: %d held, %d refused; want 20 and 10", held, refused)
	}
	evs := e.stop()
	var capped int64
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Reason == "flow-cap" && ev.Net.Domain == "echo.test" {
			capped += max(ev.Net.Count, 1)
		}
	}
	if capped != 10 {
		t.Errorf("flow-cap events count %d refused connections, want 10:\n%s", capped, dumpEvents(evs))
	}
}
