package main

// guestConfig is what the guest script is told about its peer.
type guestConfig struct {
	DNS          string     `json:"dns"`           // the peer's DNS server; "" sends no DNS
	AllowedName  string     `json:"allowed_name"`  // a name the peer answers itself
	DeniedSuffix string     `json:"denied_suffix"` // d<N>.<suffix> is answered NXDOMAIN by the peer
	Host         string     `json:"host"`          // the upstream's address as the guest sees it; "" takes AllowedName's answer
	Port         int        `json:"port"`          // the upstream's port
	Denied       [][2]any   `json:"denied"`        // [host, port] pairs a SYN to which is refused; host "" is Host
	Rates        guestRates `json:"rates"`
}

// guestRates is the soak's traffic mix.
type guestRates struct {
	DNSAllowed float64 `json:"dns_allowed"` // queries/s for AllowedName
	DNSDenied  float64 `json:"dns_denied"`  // queries/s for a new denied name each time
	Short      float64 `json:"short"`       // short flows/s: connect, 4 KiB down, close
	SYN        float64 `json:"syn"`         // denied SYNs/s
	Long       int     `json:"long"`        // concurrent long transfers, alternating download and upload
	LongBytes  int64   `json:"long_bytes"`  // size of each long transfer
	LongRate   int64   `json:"long_rate"`   // its pace, bytes/s
}

// guestScript runs in the namespace: python3 -c guestScript MODE CONFIG.
//
//	setup      one DNS query for the allowed name, one allowed flow
//	hold N     open N connections to the upstream, print "held N", keep
//	           them open until stdin ends, close them
//	soak SECS  the mixed traffic of Rates for SECS seconds, then a JSON
//	           object of counts on stdout
const guestScript = `
import json, random, resource, socket, struct, sys, threading, time

mode, cfg = sys.argv[1], json.loads(sys.argv[2])
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

def skip_name(b, off):
    while True:
        l = b[off]
        if l == 0:
            return off + 1
        if l & 0xC0 == 0xC0:
            return off + 2
        off += 1 + l

def query(sock, name):
    qid = random.getrandbits(16)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    sock.sendto(q, (cfg["dns"], 53))
    while True:
        b, _ = sock.recvfrom(4096)
        if len(b) >= 12 and struct.unpack(">H", b[:2])[0] == qid:
            break
    rcode, an = b[3] & 0xF, struct.unpack(">H", b[6:8])[0]
    off = skip_name(b, 12) + 4
    ips = []
    for _ in range(an):
        off = skip_name(b, off)
        typ, _, _, n = struct.unpack(">HHIH", b[off:off + 10])
        off += 10
        if typ == 1 and n == 4:
            ips.append(socket.inet_ntoa(b[off:off + 4]))
        off += n
    return rcode, ips

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    return s

def upstream_host():
    if cfg["host"]:
        return cfg["host"]
    rcode, ips = query(udp(), cfg["allowed_name"])
    if rcode != 0 or not ips:
        raise SystemExit("the allowed name %s got rcode %d, no address" % (cfg["allowed_name"], rcode))
    return ips[0]

def fetch(host, n):
    s = socket.create_connection((host, cfg["port"]), timeout=10)
    try:
        s.sendall(b"P %d\n" % n)
        got = 0
        while True:
            b = s.recv(65536)
            if not b:
                return got == n
            got += len(b)
    finally:
        s.close()

if mode == "setup":
    if cfg["dns"]:
        upstream_host()
    host = cfg["host"] or upstream_host()
    if not fetch(host, 1024):
        raise SystemExit("the setup flow got a short answer")
    print("ok")

elif mode == "hold":
    host, n = upstream_host(), int(sys.argv[3])
    socks = []
    for i in range(n):
        try:
            s = socket.create_connection((host, cfg["port"]), timeout=10)
        except OSError as e:
            raise SystemExit("connection %d of %d: %s" % (i + 1, n, e))
        s.sendall(b"H\n")
        socks.append(s)
    print("held", len(socks), flush=True)
    sys.stdin.read()
    for s in socks:
        s.close()

elif mode == "soak":
    host, end = upstream_host(), time.monotonic() + float(sys.argv[3])
    rates = cfg["rates"]
    counts, errs, lock = {}, {}, threading.Lock()

    def count(key, ok, err=None):
        with lock:
            k = key + (" ok" if ok else " fail")
            counts[k] = counts.get(k, 0) + 1
            if err is not None:
                errs[key] = str(err)

    def paced(key, rate, fn):
        if rate <= 0:
            return
        iv, nxt = 1.0 / rate, time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                return
            if nxt > now:
                time.sleep(nxt - now)
            nxt += iv
            if time.monotonic() - nxt > 1:
                nxt = time.monotonic()  # fell behind: steady, not a burst
            try:
                count(key, fn())
            except Exception as e:
                count(key, False, e)

    def dns_allowed(sock=udp()):
        rcode, ips = query(sock, cfg["allowed_name"])
        return rcode == 0 and len(ips) > 0

    seq = [0]
    def dns_denied(sock=udp()):
        seq[0] += 1
        rcode, _ = query(sock, "d%d.%s" % (seq[0], cfg["denied_suffix"]))
        return rcode == 3

    denied = [(h or host, p) for h, p in cfg["denied"]]
    nsyn = [0]
    def syn():
        nsyn[0] += 1
        h, p = denied[nsyn[0] % len(denied)]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1)
        try:
            s.connect((h, p))
            return False  # connected: not denied
        except ConnectionRefusedError:
            return True
        finally:
            s.close()

    def long(i):
        n, rate, up = rates["long_bytes"], rates["long_rate"], i % 2 == 1
        while time.monotonic() < end:
            try:
                s = socket.create_connection((host, cfg["port"]), timeout=10)
                s.settimeout(60)
                if up:
                    s.sendall(b"U %d\n" % n)
                    chunk, sent, t0 = b"\0" * 65536, 0, time.monotonic()
                    while sent < n:
                        k = min(len(chunk), n - sent)
                        s.sendall(chunk[:k])
                        sent += k
                        d = t0 + sent / rate - time.monotonic()
                        if d > 0:
                            time.sleep(d)
                    ok = s.recv(16) == b"ok\n"
                else:
                    s.sendall(b"S %d %d\n" % (n, rate))
                    got = 0
                    while True:
                        b = s.recv(65536)
                        if not b:
                            break
                        got += len(b)
                    ok = got == n
                s.close()
                count("long-up" if up else "long-down", ok)
            except Exception as e:
                count("long-up" if up else "long-down", False, e)
            up = not up

    threads = []
    if cfg["dns"]:
        threads += [threading.Thread(target=paced, args=("dns-allowed", rates["dns_allowed"], dns_allowed)),
                    threading.Thread(target=paced, args=("dns-denied", rates["dns_denied"], dns_denied))]
    threads += [threading.Thread(target=paced, args=("short", rates["short"], lambda: fetch(host, 4096))),
                threading.Thread(target=paced, args=("syn-denied", rates["syn"], syn))]
    threads += [threading.Thread(target=long, args=(i,)) for i in range(rates["long"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"counts": counts, "errors": errs}))
`
