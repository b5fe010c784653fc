package sqliteexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/store"
)

var guestT0 = time.Date(2026, 5, 1, 11, 59, 59, 987654321, time.UTC) // the guest's clock, a little behind

// execStore holds two sessions. s1: a command that exited, a DNS answer, a
// created file, a rename of a directory, a command killed by a signal on a
// tty, an overflow, a deleted file, an exec event with no field set and
// the guest's interactive shell. s2: one fs event.
func execStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Begin(store.Session{ID: "s1", StartedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	w.Append(store.Event{Time: t0.Add(1 * ms), Exec: &store.Exec{
		Argv: []string{"sh", "-c", "echo 'hi' > out.txt"}, Dir: "sub dir", PID: 812,
		Start: guestT0, Duration: 2500 * time.Microsecond, ExitCode: 0}})
	w.Append(store.Event{Time: t0.Add(2 * ms), DNS: &store.DNS{QName: "x.test", Decision: store.Allowed}})
	w.Append(store.Event{Time: t0.Add(3 * ms), FS: &store.FS{Action: store.FSCreated, Path: "sub dir/out.txt", Size: 3, GuestTime: guestT0.Add(2 * ms)}})
	w.Append(store.Event{Time: t0.Add(4 * ms), FS: &store.FS{Action: store.FSRenamed, Path: "new/dir", OldPath: "old/dir", Dir: true}})
	w.Append(store.Event{Time: t0.Add(5 * ms), Exec: &store.Exec{
		Argv: []string{"sleep", "100"}, TTY: true, PID: 900, Start: guestT0.Add(time.Second),
		Duration: 90 * time.Second, ExitCode: 137, Signal: "KILL"}})
	w.Append(store.Event{Time: t0.Add(6 * ms), FS: &store.FS{Action: store.FSOverflow, Path: ".", GuestTime: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}})
	w.Append(store.Event{Time: t0.Add(7 * ms), FS: &store.FS{Action: store.FSDeleted, Path: "a\xffb.txt"}})
	w.Append(store.Event{Time: t0.Add(8 * ms), Kind: store.KindExec})
	w.Append(store.Event{Time: t0.Add(9 * ms), Exec: &store.Exec{TTY: true, ExitCode: 1, Start: time.Unix(0, 0)}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	w, err = st.Begin(store.Session{ID: "s2", StartedAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Time: t0.Add(time.Hour), FS: &store.FS{Action: store.FSModified, Path: "go.mod", Size: 1 << 40}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestExecAndFSEvents(t *testing.T) {
	st := execStore(t)
	out, res := export(t, st, Options{})
	if want := (Result{Sessions: 2, Events: 10, DNSEvents: 1, ExecEvents: 4, FSEvents: 5, Duration: res.Duration}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	db := openExport(t, out)
	for _, err := range VerifySchema(db, SchemaVersion) {
		t.Error(err)
	}
	if bad := pragmaRows(t, db, "foreign_key_check"); len(bad) != 0 {
		t.Errorf("foreign_key_check: %v", bad)
	}
	ms := time.Millisecond
	guest := func(d time.Duration) (string, int64) {
		return guestT0.Add(d).Format(tsLayout), guestT0.Add(d).UnixMilli()
	}

	ex := queryRows(t, db, "SELECT * FROM exec_events ORDER BY id")
	if len(ex) != 4 {
		t.Fatalf("%d exec events", len(ex))
	}
	g0, g0ms := guest(0)
	checkRow(t, "exec_events[1]", ex[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(1), "timestamp": ts(ms), "timestamp_ms": tsMS(ms),
		"command": `sh -c "echo 'hi' > out.txt"`, "exit_code": int64(0), "duration_ms": 2.5,
		"argv": `["sh","-c","echo 'hi' > out.txt"]`, "dir": "sub dir", "tty": int64(0), "pid": int64(812),
		"signal": nil, "started_at": g0, "started_at_ms": g0ms,
	})
	g1, g1ms := guest(time.Second)
	checkRow(t, "exec_events[2]", ex[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(5), "timestamp": ts(5 * ms), "timestamp_ms": tsMS(5 * ms),
		"command": "sleep 100", "exit_code": int64(137), "duration_ms": 90000.0,
		"argv": `["sleep","100"]`, "dir": nil, "tty": int64(1), "pid": int64(900),
		"signal": "KILL", "started_at": g1, "started_at_ms": g1ms,
	})
	// An exec event with no field set is still a row.
	checkRow(t, "exec_events[3]", ex[2], map[string]any{
		"id": int64(3), "session_id": "s1", "seq": int64(8), "timestamp": ts(8 * ms), "timestamp_ms": tsMS(8 * ms),
		"command": nil, "exit_code": int64(0), "duration_ms": 0.0,
		"argv": nil, "dir": nil, "tty": int64(0), "pid": nil,
		"signal": nil, "started_at": nil, "started_at_ms": nil,
	})
	// The interactive shell (no argv); a guest clock at the epoch is a time.
	checkRow(t, "exec_events[4]", ex[3], map[string]any{
		"id": int64(4), "session_id": "s1", "seq": int64(9), "timestamp": ts(9 * ms), "timestamp_ms": tsMS(9 * ms),
		"command": nil, "exit_code": int64(1), "duration_ms": 0.0,
		"argv": nil, "dir": nil, "tty": int64(1), "pid": nil,
		"signal": nil, "started_at": "1970-01-01T00:00:00.000000000Z", "started_at_ms": int64(0),
	})

	fs := queryRows(t, db, "SELECT * FROM fs_events ORDER BY id")
	if len(fs) != 5 {
		t.Fatalf("%d fs events", len(fs))
	}
	checkRow(t, "fs_events[1]", fs[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(3), "timestamp": ts(3 * ms), "timestamp_ms": tsMS(3 * ms),
		"action": "created", "path": "sub dir/out.txt", "size": int64(3), "old_path": nil, "is_dir": int64(0),
		"guest_time": guestT0.Add(2 * ms).Format(tsLayout), "guest_time_ms": guestT0.Add(2 * ms).UnixMilli(),
	})
	checkRow(t, "fs_events[2]", fs[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(4), "timestamp": ts(4 * ms), "timestamp_ms": tsMS(4 * ms),
		"action": "renamed", "path": "new/dir", "size": int64(0), "old_path": "old/dir", "is_dir": int64(1), "guest_time": nil, "guest_time_ms": nil,
	})
	checkRow(t, "fs_events[3]", fs[2], map[string]any{
		"id": int64(3), "session_id": "s1", "seq": int64(6), "timestamp": ts(6 * ms), "timestamp_ms": tsMS(6 * ms),
		"action": "overflow", "path": ".", "size": int64(0), "old_path": nil, "is_dir": int64(0),
		// A back-dated claim stays the guest's: timestamp is the host's.
		"guest_time": "2000-01-01T00:00:00.000000000Z", "guest_time_ms": int64(946684800000),
	})
	checkRow(t, "fs_events[4]", fs[3], map[string]any{
		"id": int64(4), "session_id": "s1", "seq": int64(7), "timestamp": ts(7 * ms), "timestamp_ms": tsMS(7 * ms),
		"action": "deleted", "path": "a\uFFFDb.txt", "size": int64(0), "old_path": nil, "is_dir": int64(0), "guest_time": nil, "guest_time_ms": nil,
	})
	checkRow(t, "fs_events[5]", fs[4], map[string]any{
		"id": int64(5), "session_id": "s2", "seq": int64(1), "timestamp": ts(time.Hour), "timestamp_ms": tsMS(time.Hour),
		"action": "modified", "path": "go.mod", "size": int64(1 << 40), "old_path": nil, "is_dir": int64(0), "guest_time": nil, "guest_time_ms": nil,
	})

	sums := queryRows(t, db, "SELECT id, events, dns, net, model_calls, exec, fs, allowed, denied FROM sessions ORDER BY started_at")
	checkRow(t, "sessions[s1]", sums[0], map[string]any{"id": "s1", "events": int64(9), "dns": int64(1), "net": int64(0),
		"model_calls": int64(0), "exec": int64(4), "fs": int64(4), "allowed": int64(1), "denied": int64(0)})
	checkRow(t, "sessions[s2]", sums[1], map[string]any{"id": "s2", "events": int64(1), "dns": int64(0), "net": int64(0),
		"model_calls": int64(0), "exec": int64(0), "fs": int64(1), "allowed": int64(0), "denied": int64(0)})

	// argv is the exact words: a query can take them apart.
	var words []string
	if err := json.Unmarshal([]byte(ex[0]["argv"].(string)), &words); err != nil || !reflect.DeepEqual(words, []string{"sh", "-c", "echo 'hi' > out.txt"}) {
		t.Errorf("argv %q reads back as %q (%v)", ex[0]["argv"], words, err)
	}
	if r := queryRows(t, db, "SELECT json_extract(argv, '$[2]') AS w FROM exec_events WHERE id = 1"); r[0]["w"] != "echo 'hi' > out.txt" {
		t.Errorf("json_extract(argv, '$[2]') = %v", r[0]["w"])
	}
	// The indexes on the new tables are used.
	for _, q := range []string{
		"SELECT * FROM exec_events WHERE session_id = 's1' AND seq = 5",
		"SELECT * FROM fs_events WHERE path = 'go.mod'",
	} {
		plan := queryRows(t, db, "EXPLAIN QUERY PLAN "+q)
		if detail, _ := plan[0]["detail"].(string); !strings.Contains(strings.ToLower(detail), "using index") {
			t.Errorf("%s: query plan %q does not use an index", q, detail)
		}
	}
	// Deterministic, scrubbed or not, and scrubbing changes nothing here
	// but the stored values, which a scrubbed export leaves out, and the flag
	// that says so.
	plain := dumpWithout(t, db, "record", "scrubbed")
	for _, opt := range []Options{{}, {Scrub: true}} {
		a, _ := export(t, st, opt)
		if d := dumpWithout(t, openExport(t, a), "record", "scrubbed"); !reflect.DeepEqual(d, plain) {
			t.Errorf("export with %+v differs from the first", opt)
		}
	}
}

func TestShellJoin(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"ls", "-la", "src/"}, "ls -la src/"},
		{[]string{"go", "test", "-run=TestX", "./..."}, "go test -run=TestX ./..."},
		{[]string{"sh", "-c", "echo hi"}, "sh -c 'echo hi'"},
		{[]string{"sh", "-c", "echo 'hi' > out.txt"}, `sh -c "echo 'hi' > out.txt"`},
		{[]string{"echo", `it's "$HOME"`}, `echo 'it'\''s "$HOME"'`},
		{[]string{"echo", "don't!"}, `echo 'don'\''t!'`},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{""}, "''"},
		{[]string{"printf", "a\nb\t\x1b[0m"}, `printf $'a\nb\t\E[0m'`},
		{[]string{"echo", "it's\n"}, `echo $'it\'s\n'`},
		{[]string{"echo", `back\slash`}, `echo 'back\slash'`},
		{[]string{"echo", "\x00\x7f"}, `echo $'\x00\x7f'`},
		{[]string{"cat", "evil\u202etxt.exe"}, `cat $'evil\u202etxt.exe'`},
		{[]string{"git", "commit", "-m", "fix: café 日本"}, "git commit -m 'fix: café 日本'"},
		{[]string{"café", "naïve"}, "café naïve"},
		{[]string{"rm", "*.go", "~/x", "a;b", "$(id)", "#c"}, `rm '*.go' '~/x' 'a;b' '$(id)' '#c'`},
		{[]string{"FOO=bar", "env", "A=1"}, "'FOO=bar' env A=1"},
		{[]string{"curl", "-H", "Authorization: [REDACTED:authorization]", "https://x.test/?a=1&b=2"},
			`curl -H 'Authorization: [REDACTED:authorization]' 'https://x.test/?a=1&b=2'`},
	} {
		if got := ShellJoin(c.argv); got != c.want {
			t.Errorf("ShellJoin(%q)\n = %s\nwant %s", c.argv, got, c.want)
		}
	}
}

// TestShellJoinReadsBack runs the joined line through a real shell, when
// there is one, and checks it gives back the words.
func TestShellJoinReadsBack(t *testing.T) {
	bash := lookBash(t)
	argvs := [][]string{
		{"sh", "-c", "echo 'hi' > out.txt"},
		{"echo", `it's "$HOME" $(id) ` + "`x`" + ` \ !`},
		{"printf", "a\nb\t\x1b[0m\r\x01 'q' \\"},
		{"x", "", "café", "evil\u202etxt", "*", "~", "a=b", "#", "{a,b}", "[x]"},
	}
	for _, argv := range argvs {
		line := ShellJoin(argv)
		got, err := bashWords(bash, line)
		if err != nil {
			t.Errorf("bash on %s: %v", line, err)
			continue
		}
		if !reflect.DeepEqual(got, argv) {
			t.Errorf("bash reads %s as %q, want %q", line, got, argv)
		}
	}
}

func TestScrubArgv(t *testing.T) {
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"ls", "-la"}, []string{"ls", "-la"}},
		{[]string{"grep", "our cookie policy", "the bearer of bad news"}, []string{"grep", "our cookie policy", "the bearer of bad news"}},
		// Within one word: Scrub of the word, the rest of it kept.
		{[]string{"curl", "-H", "Authorization: Bearer abcdefgh12345678", "https://x.test"},
			[]string{"curl", "-H", "Authorization: [REDACTED:authorization]", "https://x.test"}},
		{[]string{"tool", "--key=sk-ant-api03-AbCdEfGhIjKlMnOp"}, []string{"tool", "--key=[REDACTED:anthropic-key]"}},
		// Across words: each word the secret reaches, whole.
		{[]string{"curl", "-H", "Authorization:", "Bearer", "opaque-t0ken-123456"},
			[]string{"curl", "-H", "Authorization:", "[REDACTED:authorization]", "[REDACTED:authorization]"}},
		{[]string{"http", "x.test", "Bearer", "opaque-t0ken-123456", "--json"},
			[]string{"http", "x.test", "Bearer", "[REDACTED:bearer]", "--json"}},
		{[]string{"echo", "-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7bq98pem", "-----END RSA PRIVATE KEY-----", "|", "ssh-add"},
			[]string{"echo", "[REDACTED:private-key]", "[REDACTED:private-key]", "[REDACTED:private-key]", "|", "ssh-add"}},
		{[]string{"a", "x-api-key:", "plainkey-0f9e8d7c6b5a"}, []string{"a", "x-api-key:", "[REDACTED:x-api-key]"}},
		{[]string{"echo", "-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "AAAAEbm9uZQ"}, // no END: to the end
			[]string{"echo", "[REDACTED:private-key]", "[REDACTED:private-key]", "[REDACTED:private-key]"}},
		{[]string{"x", "Authorization: AWS4-HMAC-SHA256", "Credential=abc/20260501/s3,", "Signature=fe5f80f77d5fa3beca038a248ff027"},
			[]string{"x", "Authorization: [REDACTED:authorization]", "[REDACTED:authorization]", "[REDACTED:authorization]"}},
		{[]string{"grep", "-rn", "authorization:", "src/"}, // a false alarm: over-redacting is the safe side
			[]string{"grep", "-rn", "authorization:", "[REDACTED:authorization]"}},
		{[]string{"curl", "-H", "Authorization: Basic", "dXNlcjpwYXNzd29yZA==", "https://x.test"},
			[]string{"curl", "-H", "Authorization: [REDACTED:authorization]", "[REDACTED:authorization]", "[REDACTED:authorization]"}},
		{[]string{"curl", "-H", "Cookie: a=1", "-H", "X-Api-Key:", "k-0f9e8d7c6b5a"},
			[]string{"curl", "-H", "Cookie: [REDACTED:cookie]", "-H", "X-Api-Key:", "[REDACTED:x-api-key]"}},
		{[]string{"curl", "-H", "Cookie: a=1", "-H", "X-Api-Key: k-0f9e8d7c6b5a", "https://x.test"},
			[]string{"curl", "-H", "Cookie: [REDACTED:cookie]", "-H", "X-Api-Key: [REDACTED:x-api-key]", "https://x.test"}},
	} {
		if got := dlp.ScrubArgv(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("dlp.ScrubArgv(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

func lookBash(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH to read the lines back with")
	}
	return bash
}

// bashWords returns the words bash makes of line, in a directory where a
// glob left unquoted would match a file.
func bashWords(bash, line string) ([]string, error) {
	dir, err := os.MkdirTemp("", "shelljoin")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, f := range []string{"x", "a", "out.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `printf '%s\0' `+line)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=/nonexistent", "PATH=" + os.Getenv("PATH"), "LC_ALL=C.UTF-8"} // $'\u…' needs a UTF-8 locale
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"), nil
}
