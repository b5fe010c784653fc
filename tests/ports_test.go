package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Published ports, as a user drives them: a server in the guest answers
// curl on the host through the published port; a port removed at run time
// is refused at once, one added at run time answers; another sandbox
// asking for a taken host port is refused with why; every connection is
// an inbound flow in the export.

// freePort is a host TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

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
	hp := freePort(t)
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

	// Another sandbox asking for the taken host port is refused, naming it.
	r2 := e.must(1, nil, "start", "--ca-dir", e.caDir, "--workspace", e.ws, "--publish", strconv.Itoa(hp)+":80", "other")
	if !strings.Contains(r2.stderr, "127.0.0.1:"+strconv.Itoa(hp)) || !strings.Contains(r2.stderr, "in use") {
		t.Errorf("a second sandbox on a taken host port: %s", r2.stderr)
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
	out := filepath.Join(t.TempDir(), "out.db")
	e.must(0, nil, "export", "--sqlite", out, "--session", sid)
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
	hp := freePort(t)
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
