package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/image"
)

// Published ports, as a user drives them: a server in the guest answers
// curl on the host through the published port; a port removed at run time
// is refused at once, one added at run time answers; another sandbox
// asking for a taken host port is refused with why; every connection is
// an inbound flow in the export.

// curlUntil runs the real curl against url until it answers (a Python
// server takes seconds to start under TCG) or within passes.
func curlUntil(t *testing.T, url string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := exec.Command("curl", "-sS", "--fail", "-m", "10", url).CombinedOutput()
		if err == nil {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl %s: %v: %s", url, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// serveScript starts python's http.server on port in the guest, serving
// a file that names it, detached from the exec's session; its log is
// /tmp/http-PORT.log.
func serveScript(port int) string {
	return fmt.Sprintf(`mkdir -p /srv/%[1]d && echo "guest port %[1]d" > /srv/%[1]d/index.html && cd /srv/%[1]d && (setsid python3 -m http.server %[1]d </dev/null >/tmp/http-%[1]d.log 2>&1 &)`, port)
}

func TestPublishedPorts(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on the host (apt-get install curl)")
	}
	e := newSBEnv(t)
	hp := refusedPort(t)
	e.start("web", "--publish", strconv.Itoa(hp)+":8000")
	e.sh("web", serveScript(8000)+"; "+serveScript(9000))

	url := fmt.Sprintf("http://127.0.0.1:%d/index.html", hp)
	if got := curlUntil(t, url, 60*time.Second); got != "guest port 8000\n" {
		t.Fatalf("curl %s: %q", url, got)
	}
	// The guest's other server is not published: nothing on the host
	// reaches it.
	if r := e.must(0, nil, "port", "web", "ls", "--json"); strings.Contains(r.stdout, "9000") {
		t.Fatalf("port 9000 published without being asked: %s", r.stdout)
	}

	// Added at run time: a free host port to the server on 9000.
	r := e.must(0, nil, "port", "web", "add", "0:9000")
	spec := strings.TrimSpace(r.stdout)
	parts := strings.Split(spec, ":")
	if len(parts) != 3 || parts[0] != "127.0.0.1" || parts[2] != "9000/tcp" || parts[1] == "0" {
		t.Fatalf("capsem port add 0:9000 printed %q", spec)
	}
	url9 := "http://127.0.0.1:" + parts[1] + "/index.html"
	if got := curlUntil(t, url9, 30*time.Second); got != "guest port 9000\n" {
		t.Fatalf("curl %s: %q", url9, got)
	}
	if st := e.must(0, nil, "ls").stdout; !strings.Contains(st, "127.0.0.1:"+parts[1]+"->9000") {
		t.Errorf("capsem ls does not show the added port:\n%s", st)
	}

	// Another sandbox asking for the taken host port is refused, naming
	// it, and without costing the shared boot snapshot: only a failed
	// restore falls back to a cold boot.
	snaps := bootSnapshots(t)
	r2 := e.must(1, nil, "start", "--ca-dir", e.caDir, "--workspace", e.ws, "--publish", strconv.Itoa(hp)+":80", "other")
	if !strings.Contains(r2.stderr, "127.0.0.1:"+strconv.Itoa(hp)) || !strings.Contains(r2.stderr, "in use") || strings.Contains(r2.stderr, "booting the kernel") {
		t.Errorf("a second sandbox on a taken host port: %s", r2.stderr)
	}
	for name, mod := range snaps {
		if now, ok := bootSnapshots(t)[name]; !ok || !now.Equal(mod) {
			t.Errorf("the boot snapshot %s was removed or made again by a start that failed for a taken port", name)
		}
	}

	// Removed at run time: refused at once.
	e.must(0, nil, "port", "web", "rm", "0:9000")
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+parts[1], 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("127.0.0.1:%s still accepts after capsem port rm", parts[1])
	}
	if got := curlUntil(t, url, 5*time.Second); got != "guest port 8000\n" {
		t.Fatalf("the first port after the second was removed: %q", got)
	}

	// Kept across stop and start; the listener closes with the sandbox.
	sid := e.ls()["web"].SessionID
	e.must(0, nil, "stop", "web")
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(hp), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the published port still accepts after capsem stop")
	}
	if got := e.must(0, nil, "port", "web").stdout; !strings.Contains(got, fmt.Sprintf("127.0.0.1:%d:8000/tcp", hp)) || strings.Contains(got, "9000") {
		t.Errorf("the stopped sandbox's ports:\n%s", got)
	}

	// The export: inbound flows, the host peer's address, the bytes.
	db := e.exportDB(sid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT port, src_ip, reason, matched_rule, bytes_sent FROM net_events WHERE direction = 'inbound' AND decision = 'allowed'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[int]bool{}
	for rows.Next() {
		var port int
		var src, reason, rule string
		var sent int64
		if err := rows.Scan(&port, &src, &reason, &rule, &sent); err != nil {
			t.Fatal(err)
		}
		if src != "127.0.0.1" || reason != "published" || sent <= 0 || !strings.HasSuffix(rule, ":"+strconv.Itoa(port)+"/tcp") {
			t.Errorf("an inbound flow: port %d from %s, %s, rule %s, %d bytes sent", port, src, reason, rule, sent)
		}
		seen[port] = true
	}
	if !seen[8000] || !seen[9000] {
		t.Errorf("inbound flows to guest ports %v, want 8000 and 9000", seen)
	}
	var outbound int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM net_events WHERE direction = 'outbound' AND transport = 'tcp' AND port IN (8000, 9000)`).Scan(&outbound); err != nil || outbound != 0 {
		t.Errorf("%d outbound rows for the published ports (%v)", outbound, err)
	}
}

// capsem run --publish: the run's command serves, the host reaches it
// while it runs.
func TestRunPublish(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on the host (apt-get install curl)")
	}
	e := newSBEnv(t)
	hp := refusedPort(t)
	got := make(chan string, 1)
	go func() {
		out, _ := exec.Command("sh", "-c", fmt.Sprintf("for i in $(seq 200); do curl -s --fail -m 5 http://127.0.0.1:%d/index.html && exit 0; sleep 0.3; done; exit 1", hp)).CombinedOutput()
		got <- string(out)
	}()
	r := e.must(0, nil, "run", "--ca-dir", e.caDir, "--workspace", e.ws, "--publish", strconv.Itoa(hp)+":8000", "--",
		"sh", "-c", serveScript(8000)+"; for i in $(seq 240); do grep -q 'GET /index.html' /tmp/http-8000.log && exit 0; sleep 0.5; done; exit 3")
	t.Logf("capsem run --publish: %v", r.took.Round(time.Millisecond))
	select {
	case out := <-got:
		if out != "guest port 8000\n" {
			t.Fatalf("curl through capsem run --publish: %q", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("curl did not finish")
	}
}

// lineServer answers each connection's first line with prefix and it.
func lineServer(t *testing.T, prefix string) int {
	t.Helper()
	return loopbackServer(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 256)
		n, _ := c.Read(buf)
		_, _ = c.Write([]byte(prefix + string(buf[:n])))
	})
}

// guestDial is a guest script that connects to host:port, sends "hi\n" and
// prints the answer, or "refused: …".
func guestDial(host string, port int) string {
	return fmt.Sprintf(`python3 -c '
import socket
try:
    s = socket.create_connection(("%s", %d), 10)
    s.sendall(b"hi\n")
    print(s.recv(100).decode().strip())
except OSError as e:
    print("refused:", e)
'`, host, port)
}

// A [[forward]] table: the guest reaches exactly the named host service
// by name; another port of the name, the service's port on the gateway
// and another host service are refused; a reload removes it; the flows
// are in the export, reason forwarded.
func TestForward(t *testing.T) {
	e := newSBEnv(t)
	svc, other := lineServer(t, "svc:"), lineServer(t, "other:")
	pol := filepath.Join(t.TempDir(), "policy.toml")
	write := func(body string) {
		if err := os.WriteFile(pol, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("[[forward]]\nname = \"db.capsem.internal\"\nport = 5432\nto = \"127.0.0.1:%d\"\n", svc))
	e.start("fw", "--policy", pol)

	for _, c := range []struct {
		host string
		port int
		want string
		why  string
	}{
		{"db.capsem.internal", 5432, "svc:hi", "the table's name and port reach exactly its service"},
		{"db.capsem.internal", other, "refused:", "another port of the name is not forwarded"},
		{"198.18.0.1", svc, "refused:", "the service's port on the gateway"},
		{"db.capsem.internal", svc, "refused:", "the service's own port number on the name"},
	} {
		if got := strings.TrimSpace(e.sh("fw", guestDial(c.host, c.port))); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s:%d (%s): %q, want %q", c.host, c.port, c.why, got, c.want)
		}
	}

	// A reload without the table: the name no longer resolves.
	write("[network]\nallow = []\n")
	e.must(0, nil, "policy", "reload", "fw")
	if got := strings.TrimSpace(e.sh("fw", guestDial("db.capsem.internal", 5432))); !strings.HasPrefix(got, "refused:") {
		t.Errorf("after the reload removed the table: %q", got)
	}

	sid := e.ls()["fw"].SessionID
	e.must(0, nil, "stop", "fw")
	db := e.exportDB(sid)
	var n int
	var rule, detail, dir string
	if err := db.QueryRow(`SELECT count(*), max(matched_rule), max(detail), max(direction) FROM net_events WHERE reason = 'forwarded' AND decision = 'allowed' AND domain = 'db.capsem.internal' AND port = 5432`).Scan(&n, &rule, &detail, &dir); err != nil {
		t.Fatal(err)
	}
	if n != 1 || rule != fmt.Sprintf("forward db.capsem.internal:5432 -> 127.0.0.1:%d", svc) || !strings.Contains(detail, fmt.Sprintf("127.0.0.1:%d", svc)) || dir != "outbound" {
		t.Errorf("the forwarded flow in the export: %d rows, rule %q, detail %q, direction %q", n, rule, detail, dir)
	}
}

// exportDB exports session sid with capsem export --sqlite and opens the
// file; it is closed when the test ends.
func (e *sbEnv) exportDB(sid string) *sql.DB {
	e.t.Helper()
	out := filepath.Join(e.t.TempDir(), "out.db")
	e.must(0, nil, "export", "--sqlite", out, "--session", sid)
	db, err := sql.Open("sqlite", out)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

// bootSnapshots are the boot snapshots in the image cache, by name, with
// their modification times.
func bootSnapshots(t *testing.T) map[string]time.Time {
	t.Helper()
	root, err := image.DefaultCacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "bootsnap"))
	out := map[string]time.Time{}
	for _, en := range entries {
		if fi, err := en.Info(); err == nil && en.IsDir() && !strings.Contains(en.Name(), ".partial") {
			out[en.Name()] = fi.ModTime()
		}
	}
	if len(out) == 0 {
		t.Fatal("no boot snapshot in the image cache after a sandbox started from one")
	}
	return out
}
