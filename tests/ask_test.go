package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"
)

// askPolicy allows known.test and asks about every other name; each
// name the tests use goes to the HTTPS upstream on port.
func askPolicy(t *testing.T, port int, caPath string) string {
	t.Helper()
	names := []string{"known.test", "once.test", "always.test", "api.test", "nobody.test"}
	var resolve []string
	for _, n := range names {
		resolve = append(resolve, fmt.Sprintf("%q = \"127.0.0.1:%d\"", n, port))
	}
	pol := filepath.Join(t.TempDir(), "policy.toml")
	err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[network]
allow = ["known.test"]
unknown = "ask"
ask_timeout = 45

[upstream]
resolve = { %s }
ca_files = [%q]
`, strings.Join(resolve, ", "), caPath)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// ptyProc is a capsem command on a pseudo-terminal, its output kept.
type ptyProc struct {
	t   *testing.T
	cmd *exec.Cmd
	ptm *os.File

	mu   sync.Mutex
	out  strings.Builder
	seen int // what expect has consumed
}

func startPTY(t *testing.T, args ...string) *ptyProc {
	t.Helper()
	ptm, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	p := &ptyProc{t: t, ptm: ptm, cmd: exec.Command(capsemBin, args...)}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = pts, pts, pts
	p.cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// expect waits for re in what the terminal shows after the last match,
// and returns its submatches.
func (p *ptyProc) expect(re string, within time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(within)
	for {
		p.mu.Lock()
		rest := p.out.String()[p.seen:]
		if loc := rx.FindStringSubmatchIndex(rest); loc != nil {
			m := rx.FindStringSubmatch(rest)
			p.seen += loc[1]
			p.mu.Unlock()
			return m
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q on the terminal within %v; it shows:\n%s", re, within, rest)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *ptyProc) send(s string) {
	if _, err := p.ptm.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ptyProc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(unix.SIGINT)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	}
	p.ptm.Close()
}

// curlIn starts curl in sandbox name in the background; its result comes
// on the channel.
func (e *sbEnv) curlIn(name, url string) <-chan sbResult {
	ch := make(chan sbResult, 1)
	go func() {
		ch <- e.exec(name, nil, nil, "curl", "-sS", "--max-time", "90", "-o", "/dev/null", "-w", "%{http_code}", url)
	}()
	return ch
}

// resolveMS looks name up in the guest: whether it resolved, and how long
// it took in milliseconds (timed in the guest).
func (e *sbEnv) resolveMS(name, host string) (bool, int) {
	e.t.Helper()
	out := e.sh(name, `s=$(date +%s%N); if getent hosts `+host+` >/dev/null; then r=ok; else r=no; fi; echo $r $(( ($(date +%s%N) - s) / 1000000 ))`)
	var r string
	var ms int
	fmt.Sscanf(out, "%s %d", &r, &ms)
	return r == "ok", ms
}

// A person answers through capsem ask on a terminal: a curl to a name the
// policy does not name waits for the answer; "once" lets that request
// through and the next dial asks again; "deny" refuses; "always" writes
// the overlay, which ls shows and a stop and start keep; with nobody
// asking the name is refused at once. Then the API's stream: a
// "session" answer given by POST lets every later dial through until
// the sandbox stops. The answers are events naming who gave them.
func TestAskCLI(t *testing.T) {
	e := newSBEnv(t)
	ca := newTestCA(t, "ask upstream CA")
	rec := &recorder{}
	port := startHTTPS(t, ca, rec, "known.test", "once.test", "always.test", "api.test", "nobody.test")
	pol := askPolicy(t, port, ca.pemPath)
	e.start("asker", "--policy", pol)

	// Nobody is asking: refused at once, not held.
	if ok, ms := e.resolveMS("asker", "nobody.test"); ok || ms > 1000 {
		t.Errorf("with nobody asking, nobody.test: resolved %v after %d ms; want refused within 1 s", ok, ms)
	}
	if out := e.sh("asker", "curl -sS -o /dev/null -w '%{http_code}' https://known.test/"); out != "200" {
		t.Errorf("the allowed name: %q", out)
	}

	p := startPTY(t, "ask", "--data", e.data, "asker")
	p.expect(`asking for sandbox asker`, 30*time.Second)

	// once: the held curl goes through; the next dial asks again.
	res := e.curlIn("asker", "https://once.test/first")
	id := p.expect(`(q\d+): the guest looks up once\.test`, 60*time.Second)[1]
	time.Sleep(2 * time.Second) // the guest's query is held meanwhile
	select {
	case r := <-res:
		t.Fatalf("curl ended before the question was answered: %+v", r)
	default:
	}
	p.expect(`allow \[o\]nce`, 5*time.Second)
	p.send("o\n")
	if r := <-res; r.code != 0 || r.stdout != "200" {
		t.Fatalf("after \"once\" curl exited %d with %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
	res = e.curlIn("asker", "https://once.test/second")
	id2 := p.expect(`(q\d+): the guest looks up once\.test`, 60*time.Second)[1]
	if id2 == id {
		t.Errorf("the second dial shared the answered question %s", id)
	}
	p.expect(`allow \[o\]nce`, 5*time.Second)
	p.send("d\n")
	if r := <-res; r.code == 0 {
		t.Errorf("after \"deny\" curl exited 0: %+v", r)
	}

	// A port the policy does not name is asked about at the connection.
	res = e.curlIn("asker", "http://known.test:8080/")
	p.expect(`the guest connects to known\.test port 8080 \(allowing it allows "known\.test:8080"\)`, 60*time.Second)
	p.expect(`allow \[o\]nce`, 5*time.Second)
	p.send("once\n")
	if r := <-res; r.code != 0 || r.stdout != "400" { // plain HTTP to the HTTPS upstream: its 400 proves the connection
		t.Errorf("after \"once\" for port 8080 curl exited %d with %q (stderr %q)", r.code, r.stdout, r.stderr)
	}

	// always: kept in the overlay, shown by ls.
	res = e.curlIn("asker", "https://always.test/")
	p.expect(`the guest looks up always\.test`, 60*time.Second)
	p.expect(`allow \[o\]nce`, 5*time.Second)
	p.send("a\n")
	if r := <-res; r.code != 0 || r.stdout != "200" {
		t.Fatalf("after \"always\" curl exited %d with %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
	overlay := filepath.Join(e.data, "sandboxes", "asker", "policy-asked.toml")
	if b, err := os.ReadFile(overlay); err != nil || !strings.Contains(string(b), "always.test") || strings.Contains(string(b), "once.test") {
		t.Errorf("the overlay after \"always\": %v\n%s", err, b)
	}
	if r := e.must(0, nil, "ls"); !strings.Contains(r.stdout, "+1 asked (always.test)") {
		t.Errorf("capsem ls does not show the asked entry:\n%s", r.stdout)
	}
	p.stop()

	// The API: a followed stream asks; POST answers "session".
	hc := e.apiClient("asker")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://capsem/v1/asks?follow=1", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	res = e.curlIn("asker", "https://api.test/")
	var u struct {
		Type     string `json:"type"`
		Question struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			Entry string `json:"entry"`
		} `json:"question"`
	}
	for lines.Scan() {
		if json.Unmarshal(lines.Bytes(), &u) == nil && u.Type == "asked" && u.Question.Name == "api.test" {
			break
		}
	}
	ar, err := hc.Post("http://capsem/v1/asks/"+u.Question.ID, "application/json", strings.NewReader(`{"answer": "session", "by": "api"}`))
	if err != nil || ar.StatusCode != 200 {
		t.Fatalf("POST /v1/asks/%s: %v %v", u.Question.ID, ar.Status, err)
	}
	ar.Body.Close()
	if r := <-res; r.code != 0 || r.stdout != "200" {
		t.Fatalf("after \"session\" curl exited %d with %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
	cancel()
	resp.Body.Close()
	if ok, _ := e.resolveMS("asker", "api.test"); !ok {
		t.Error("a session answer did not outlive its question")
	}
	id = e.ls()["asker"].SessionID

	// A stop and a start keep "always", not "session"; with nobody
	// asking, the rest is refused at once.
	e.must(0, nil, "stop", "asker")
	e.start("asker")
	if ok, _ := e.resolveMS("asker", "always.test"); !ok {
		t.Error("always.test does not resolve after a stop and a start")
	}
	for _, n := range []string{"api.test", "once.test"} {
		if ok, ms := e.resolveMS("asker", n); ok || ms > 1000 {
			t.Errorf("%s after a restart with nobody asking: resolved %v after %d ms; want refused within 1 s", n, ok, ms)
		}
	}

	db := exportRun(t, e.data, id)
	rows := queryStrings(t, db, "SELECT qname || ' ' || reason || ' ' || coalesce(matched_rule, '') FROM dns_events WHERE qtype = 'A' AND reason LIKE 'ask%' ORDER BY seq")
	for _, want := range []string{
		"nobody.test ask-unanswered ",
		"once.test asked-allowed asked: once.test (once, by cli)",
		"once.test asked-denied asked: once.test (deny, by cli)",
		"always.test asked-allowed asked: always.test (always, by cli)",
		"api.test asked-allowed asked: api.test (session, by api)",
	} {
		if !contains(rows, want) {
			t.Errorf("no DNS event %q among %q", want, rows)
		}
	}
	flows := queryStrings(t, db, "SELECT domain || ':' || port || ' ' || reason || ' ' || coalesce(matched_rule, '') FROM net_events WHERE reason LIKE 'ask%' ORDER BY seq")
	for _, want := range []string{
		"once.test:443 asked-allowed asked: once.test (once, by cli)",
		"known.test:8080 asked-allowed asked: known.test:8080 (once, by cli)",
	} {
		if !contains(flows, want) {
			t.Errorf("no flow event %q among %q", want, flows)
		}
	}
	for _, path := range []string{"/first", "/"} {
		if len(rec.with(path)) == 0 {
			t.Errorf("the upstream never saw %s", path)
		}
	}
}

// mcpCallScript calls tool echo of the gateway's server "tools" with
// curl, as streamable HTTP wants: initialize, initialized, tools/call.
const mcpCallScript = `u=https://mcp.capsem.internal/tools
v=2025-06-18
post() { curl -sS --max-time 90 -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@" "$u"; }
sid=$(post -D - -o /dev/null -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'$v'","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
post -o /dev/null -H "Mcp-Session-Id: $sid" -H "MCP-Protocol-Version: $v" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
post -H "Mcp-Session-Id: $sid" -H "MCP-Protocol-Version: $v" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"asked-echo"}}}'`

// An MCP tool no rule names, under [mcp] unknown = "ask": the call waits
// for the answer given through the API's stream; allowed once it runs on
// the host's server, denied it gets capsem's JSON-RPC refusal, and with
// nobody asking it is refused at once.
func TestAskMCP(t *testing.T) {
	e := newSBEnv(t)
	pol := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[mcp]
unknown = "ask"

[mcp.servers.tools]
command = [%q, "mcp-test-server"]
`, capsemBin)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start("mcpask", "--policy", pol)
	if out := e.sh("mcpask", mcpCallScript); !strings.Contains(out, "-32050") || !strings.Contains(out, "ask-unanswered") {
		t.Errorf("with nobody asking: %s", out)
	}
	hc := e.apiClient("mcpask")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://capsem/v1/asks?follow=1", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for _, c := range []struct{ answer, want string }{{"once", "asked-echo"}, {"deny", "-32050"}} {
		res := make(chan sbResult, 1)
		go func() { res <- e.exec("mcpask", nil, nil, "sh", "-c", mcpCallScript) }()
		var u struct {
			Type     string `json:"type"`
			Question struct {
				ID    string `json:"id"`
				Kind  string `json:"kind"`
				Tool  string `json:"tool"`
				Entry string `json:"entry"`
			} `json:"question"`
		}
		for lines.Scan() {
			if json.Unmarshal(lines.Bytes(), &u) == nil && u.Type == "asked" {
				break
			}
		}
		if u.Question.Kind != "mcp" || u.Question.Tool != "echo" || u.Question.Entry != "server=tools tools=echo" {
			t.Fatalf("the question: %+v", u.Question)
		}
		ar, err := hc.Post("http://capsem/v1/asks/"+u.Question.ID, "application/json", strings.NewReader(`{"answer": "`+c.answer+`"}`))
		if err != nil || ar.StatusCode != 200 {
			t.Fatalf("POST: %v %v", ar, err)
		}
		ar.Body.Close()
		if r := <-res; !strings.Contains(r.stdout, c.want) {
			t.Errorf("answered %s: %+v", c.answer, r)
		}
	}
	id := e.ls()["mcpask"].SessionID
	cancel()
	e.must(0, nil, "stop", "mcpask")
	db := exportRun(t, e.data, id)
	rows := queryStrings(t, db, "SELECT decision || ' ' || reason || ' ' || coalesce(matched_rule, '') FROM mcp_calls WHERE method = 'tools/call' ORDER BY seq")
	want := []string{
		"denied ask-unanswered ",
		"allowed asked-allowed asked: server=tools tools=echo (once, by api)",
		"denied asked-denied asked: server=tools tools=echo (deny, by api)",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("mcp_calls:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// The questions page of capsem ui, in chromium: while capsem ui runs the
// sandbox asks it; the question shows with its buttons, "once" lets the
// held curl through, and the event names the UI as who answered. A form
// posted from another origin is refused.
func TestAskUI(t *testing.T) {
	e := newSBEnv(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs chromium on PATH (apt-get install chromium; go tool task deps does)")
	}
	ca := newTestCA(t, "ask upstream CA")
	port := startHTTPS(t, ca, &recorder{}, "once.test")
	e.start("uiask", "--policy", askPolicy(t, port, ca.pemPath))
	base := startUI(t, e.data)
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, _, err := uiGet(base + "asks")
		if err == nil && strings.Contains(page, `<span id="following">uiask</span>`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capsem ui does not follow the sandbox's questions: %v\n%s", err, page)
		}
		time.Sleep(200 * time.Millisecond)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for as long as ctx lasts
		t.Fatalf("starting chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	res := e.curlIn("uiask", "https://once.test/ui")
	row := `tr.ask[data-sandbox="uiask"]`
	run("the questions page", chromedp.Navigate(base+"asks"), chromedp.WaitVisible(chromedp.CSS(row)))
	c, cancelEval := context.WithTimeout(ctx, 30*time.Second)
	what, err := chromedp.Run(c, chromedp.Evaluate[string](`document.querySelector('`+row+` td.what').textContent`))
	cancelEval()
	if err != nil || !strings.Contains(what, "a lookup of once.test") {
		t.Errorf("the question reads %q (%v)", what, err)
	}
	run("clicking once", chromedp.Click(chromedp.CSS(row+` button.answer-once`)))
	select {
	case r := <-res:
		if r.code != 0 || r.stdout != "200" {
			t.Errorf("after \"once\" in the UI curl exited %d with %q (stderr %q)", r.code, r.stdout, r.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("curl did not finish after the answer")
	}

	// A form from another site: refused, whatever its token.
	req, _ := http.NewRequest(http.MethodPost, base+"asks/uiask/q1", strings.NewReader("answer=always"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin answer: %s, want 403", resp.Status)
	}

	id := e.ls()["uiask"].SessionID
	e.must(0, nil, "stop", "uiask")
	db := exportRun(t, e.data, id)
	if rows := queryStrings(t, db, "SELECT matched_rule FROM dns_events WHERE qname = 'once.test' AND reason = 'asked-allowed'"); !contains(rows, "asked: once.test (once, by ui)") {
		t.Errorf("the answer's DNS events: %q", rows)
	}
}
