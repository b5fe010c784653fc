package tests

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// wsEcho is a WebSocket upstream: it answers the handshake, keeps every
// byte and every unmasked payload each connection brought, and echoes
// text and binary messages back.
type wsEcho struct {
	mu    sync.Mutex
	conns []*wsConnRec
}

type wsConnRec struct {
	host       string
	extensions string // the Sec-WebSocket-Extensions the handshake carried
	raw        bytes.Buffer
	payloads   bytes.Buffer
}

func (e *wsEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "websocket" {
		http.Error(w, "want a websocket upgrade", http.StatusBadRequest)
		return
	}
	rec := &wsConnRec{host: r.Host, extensions: r.Header.Get("Sec-WebSocket-Extensions")}
	e.mu.Lock()
	e.conns = append(e.conns, rec)
	e.mu.Unlock()
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	// permessage-deflate is answered whenever it is offered, as servers
	// do: capsem must not let it be offered.
	ext := ""
	if strings.Contains(rec.extensions, "permessage-deflate") {
		ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
		base64.StdEncoding.EncodeToString(sum[:]), ext)
	brw.Flush()
	in := bufio.NewReader(io.TeeReader(brw, &lockedWriter{&e.mu, &rec.raw}))
	var msg []byte
	for {
		head := make([]byte, 2)
		if _, err := io.ReadFull(in, head); err != nil {
			return
		}
		n := uint64(head[1] & 0x7f)
		switch n {
		case 126:
			b := make([]byte, 2)
			io.ReadFull(in, b)
			n = uint64(binary.BigEndian.Uint16(b))
		case 127:
			b := make([]byte, 8)
			io.ReadFull(in, b)
			n = binary.BigEndian.Uint64(b)
		}
		var key [4]byte
		if head[1]&0x80 != 0 {
			io.ReadFull(in, key[:])
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(in, p); err != nil {
			return
		}
		for i := range p {
			p[i] ^= key[i%4]
		}
		e.mu.Lock()
		rec.payloads.Write(p)
		e.mu.Unlock()
		op := head[0] & 0x0f
		if op >= 8 {
			if op == 8 {
				return
			}
			continue
		}
		if op != 0 {
			msg = msg[:0]
		}
		msg = append(msg, p...)
		if head[0]&0x80 != 0 && len(msg) < 126 {
			c.Write(append([]byte{0x81, byte(len(msg))}, msg...))
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// holds reports whether a connection to host brought v, in its bytes or
// in its payloads, and whether every handshake came without extensions.
func (e *wsEcho) holds(host, v string) (held, extensions bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		extensions = extensions || c.extensions != ""
		if c.host == host && (bytes.Contains(c.raw.Bytes(), []byte(v)) || bytes.Contains(c.payloads.Bytes(), []byte(v))) {
			held = true
		}
	}
	return held, extensions
}

// startSecretsWS is startSecrets with the WebSocket echo as the upstream
// of api.test (TOKEN's host) and other.test.
func startSecretsWS(t *testing.T, dlpAction string) (*secretsEnv, *wsEcho) {
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	echo := &wsEcho{}
	port := startHTTPS(t, ca, echo, "api.test", "other.test")
	s := &secretsEnv{}
	var tokenFile string
	s.real, s.bodyReal, tokenFile = writeTokenFiles(t)
	s.env = startEnv(t, secretsPolicy(port, ca.pemPath, tokenFile, dlpAction), envOptions{})
	s.ph, s.bodyPh = s.placeholders()["TOKEN"], s.placeholders()["BODY_TOKEN"]
	return s, echo
}

// wsClient is a guest WebSocket client with hand-written frames: argv is
// the host, then the messages to send, each "text:PAYLOAD" (one frame) or
// "frag:PAYLOAD" (two fragments, cut in the middle), $TOKEN replaced by
// the variable; it prints the answer to each, and ends at a close frame.
const wsClient = `
import os, socket, ssl, base64, struct, sys
host = sys.argv[1]
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection((host, 443), timeout=20), server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n" % (host, key)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
print(head.split(b"\r\n")[0].decode())
if b"permessage-deflate" in head.lower():
    print("deflate negotiated")
def frame(fin, op, payload):
    mask = os.urandom(4)
    b = bytes([(0x80 if fin else 0) | op])
    n = len(payload)
    if n < 126:
        b += bytes([0x80 | n])
    else:
        b += bytes([0x80 | 126]) + struct.pack(">H", n)
    return b + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
def need(n):
    global buf
    while len(buf) < n:
        got = s.recv(4096)
        if not got:
            raise EOFError
        buf += got
    out, buf = buf[:n], buf[n:]
    return out
def answer():
    h = need(2)
    n = h[1] & 0x7f
    if n == 126:
        n = struct.unpack(">H", need(2))[0]
    return h[0] & 0x0f, need(n)
for arg in sys.argv[2:]:
    kind, text = arg.split(":", 1)
    text = text.replace("$TOKEN", os.environ["TOKEN"]).encode()
    if kind == "text":
        s.sendall(frame(True, 1, text))
    else:
        a, b = text[:len(text) // 2], text[len(text) // 2:]
        s.sendall(frame(False, 1, a))
        s.sendall(frame(True, 0, b))
    try:
        op, p = answer()
    except (EOFError, OSError) as e:
        print("ended", repr(e))
        break
    if op == 8:
        print("close", struct.unpack(">H", p[:2])[0], p[2:].decode())
        break
    print("echo", p.decode())
`

func TestSecretsWebSocketFramesAreScanned(t *testing.T) {
	s, echo := startSecretsWS(t, "log")
	ph := s.ph

	// other.test: a clean message is echoed; the placeholder, split over
	// two fragments, closes the connection with 1008.
	out, err := s.guest("python3", "-c", wsClient, "other.test", "text:hello clean", "frag:key=$TOKEN;", "text:never sent")
	if err != nil || !strings.Contains(out, "101 Switching Protocols") || !strings.Contains(out, "echo hello clean") {
		t.Fatalf("other.test: %v\n%s", err, out)
	}
	if strings.Contains(out, "deflate negotiated") {
		t.Errorf("permessage-deflate was negotiated on a scanned connection:\n%s", out)
	}
	if !strings.Contains(out, "close 1008 capsem: secret TOKEN may not go to other.test") {
		t.Errorf("the placeholder split over two fragments: want close 1008 naming TOKEN, got:\n%s", out)
	}

	// api.test: the placeholder may go to its own host (as is: frames are
	// not rewritten); the real value may not.
	out, err = s.guest("python3", "-c", wsClient, "api.test", "text:mine $TOKEN", "text:real "+s.real)
	if err != nil || !strings.Contains(out, "echo mine "+ph) || !strings.Contains(out, "close 1008 capsem: the real value of secret TOKEN") {
		t.Errorf("api.test: %v\n%s", err, out)
	}
	if strings.Contains(out, s.real) {
		t.Errorf("the guest got the real value back:\n%s", out)
	}

	time.Sleep(200 * time.Millisecond) // the upstream's reader takes the last bytes
	if held, ext := echo.holds("other.test", ph); held || ext {
		t.Errorf("other.test's upstream got the placeholder (%v) or an extension offer (%v)", held, ext)
	}
	if held, _ := echo.holds("api.test", s.real); held {
		t.Error("api.test's upstream got the real value")
	}
	if held, _ := echo.holds("api.test", ph); !held {
		t.Error("api.test's upstream did not get the placeholder bound to it")
	}

	evs := s.stop()
	for _, c := range []struct{ domain, reason string }{{"other.test", "secret-wrong-host"}, {"api.test", "secret-real-value"}} {
		n := netEvent(evs, func(n *store.Net) bool { return n.Domain == c.domain && n.Reason == c.reason })
		if n == nil || n.Decision != store.Denied || n.MatchedRule != "TOKEN" || n.Path != "/ws" || !strings.Contains(n.Detail, "WebSocket frame") {
			t.Errorf("no denied %s event for %s naming TOKEN: %+v\n%s", c.reason, c.domain, n, dumpEvents(evs))
		}
	}
	if n := netEvent(evs, func(n *store.Net) bool { return n.Domain == "other.test" && n.StatusCode == 101 }); n == nil || !strings.Contains(n.Detail, "stripped Sec-WebSocket-Extensions") {
		t.Errorf("the upgrade's event does not say the extension offer was stripped: %+v", n)
	}
	assertNowhere(t, s.dataDir, s.real)
}

func TestSecretsWebSocketDLPBlock(t *testing.T) {
	s, echo := startSecretsWS(t, "block")
	token := "ghp_" + strings.Repeat("A1b2C3d4E5", 4)[:36]
	out, err := s.guest("python3", "-c", wsClient, "other.test", "text:hello", "text:token="+token)
	if err != nil || !strings.Contains(out, "echo hello") || !strings.Contains(out, "close 1008 capsem: a credential (github-token)") || strings.Contains(out, token) {
		t.Errorf("dlp block: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	if held, _ := echo.holds("other.test", token); held {
		t.Error("the upstream got the credential")
	}
	evs := s.stop()
	n := netEvent(evs, func(n *store.Net) bool { return n.Reason == "dlp-match" })
	if n == nil || n.Decision != store.Denied || n.MatchedRule != "github-token@ws-text-2@6" {
		t.Errorf("dlp event: %+v\n%s", n, dumpEvents(evs))
	}
}
