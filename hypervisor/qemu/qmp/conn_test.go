package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRealQEMU runs the client against qemu-system-x86_64 itself: an empty
// machine (-machine none), held before it starts (-S), with its QMP socket.
func TestRealQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86; go tool task deps installs it)")
	}
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	cmd := exec.Command(bin, "-machine", "none", "-nodefaults", "-no-user-config", "-display", "none", "-S",
		"-qmp", "unix:"+sock+",server=on,wait=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var q *Conn
	for q == nil {
		q, err = Dial(ctx, sock, Options{})
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("QMP never answered: %v; qemu: %s", err, stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer q.Close()
	if v := q.Version(); v.Major < 7 {
		t.Errorf("version %v: want QEMU 7 or later, as DESIGN.md's machine facts say", v)
	}

	var st struct {
		Status  string `json:"status"`
		Running bool   `json:"running"`
	}
	if err := q.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "prelaunch" || st.Running {
		t.Errorf("query-status = %+v, want prelaunch and not running (-S)", st)
	}

	var qe *Error
	if err := q.Execute(ctx, "capsem-no-such-command", nil, nil); !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Errorf("an unknown command: %v, want an *Error of class CommandNotFound", err)
	}

	// A descriptor passed beside getfd is QEMU's under its name: closefd
	// knows it once, and not a second time.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	name := map[string]string{"fdname": "capsem-test"}
	if err := q.ExecuteFD(ctx, "getfd", name, nil, w); err != nil {
		t.Fatalf("getfd: %v", err)
	}
	if err := q.Execute(ctx, "closefd", name, nil); err != nil {
		t.Fatalf("closefd of the passed descriptor: %v", err)
	}
	if err := q.Execute(ctx, "closefd", name, nil); !errors.As(err, &qe) {
		t.Errorf("closefd a second time: %v, want QEMU's error", err)
	}
	// getfd without a descriptor is QEMU's error, not a hang.
	if err := q.Execute(ctx, "getfd", name, nil); !errors.As(err, &qe) {
		t.Errorf("getfd without a descriptor: %v, want QEMU's error", err)
	}
}

// fakeQEMU serves one connection with script: it reads a command, and
// answers with the lines answer returns for it.
func fakeQEMU(t *testing.T, greeting string, answer func(id float64, cmd string) []string) *net.UnixConn {
	t.Helper()
	fds, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	client, server := fds[0], fds[1]
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		server.Write([]byte(greeting + "\n"))
		br := bufio.NewReader(server)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				Execute string  `json:"execute"`
				ID      float64 `json:"id"`
			}
			json.Unmarshal(line, &req)
			for _, a := range answer(req.ID, req.Execute) {
				server.Write([]byte(a + "\n"))
			}
		}
	}()
	return client
}

// socketpair is a connected pair of unix stream sockets.
func socketpair() ([2]*net.UnixConn, error) {
	var out [2]*net.UnixConn
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return out, err
	}
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "qmp-test")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return out, err
		}
		out[i] = c.(*net.UnixConn)
	}
	return out, nil
}

const greeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian test"}, "capabilities": ["oob"]}}`

func TestProtocol(t *testing.T) {
	ret := func(id float64, body string) string {
		b, _ := json.Marshal(id)
		return `{"return": ` + body + `, "id": ` + string(b) + `}`
	}
	tests := []struct {
		why     string
		greet   string
		answer  func(id float64, cmd string) []string
		wantErr string // "" = no error; else a part of it
		events  []string
	}{
		{why: "an event before the answer goes to OnEvent, the answer to the command",
			greet: greeting,
			answer: func(id float64, cmd string) []string {
				if cmd == "query-status" {
					return []string{`{"event": "RESUME", "data": {}, "timestamp": {"seconds": 1, "microseconds": 2}}`, ret(id, `{"status": "running", "running": true}`)}
				}
				return []string{ret(id, `{}`)}
			},
			events: []string{"RESUME"}},
		{why: "an error answer is a typed Error naming the command",
			greet: greeting,
			answer: func(id float64, cmd string) []string {
				if cmd == "query-status" {
					b, _ := json.Marshal(id)
					return []string{`{"error": {"class": "GenericError", "desc": "nope"}, "id": ` + string(b) + `}`}
				}
				return []string{ret(id, `{}`)}
			},
			wantErr: "qmp: query-status: nope (GenericError)"},
		{why: "an answer carrying another id is never taken for this command's",
			greet: greeting,
			answer: func(id float64, cmd string) []string {
				if cmd == "query-status" {
					return []string{ret(id+7, `{"status": "running"}`)}
				}
				return []string{ret(id, `{}`)}
			},
			wantErr: "without this command's id"},
		{why: "a peer that is not QEMU is refused at its first line",
			greet:   `SSH-2.0-OpenSSH_9.2`,
			answer:  func(float64, string) []string { return nil },
			wantErr: "not a QMP greeting"},
	}
	for _, tc := range tests {
		t.Run(tc.why, func(t *testing.T) {
			c := fakeQEMU(t, tc.greet, tc.answer)
			var events []string
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			q, err := New(ctx, c, Options{OnEvent: func(name string, _ json.RawMessage) { events = append(events, name) }})
			if err == nil {
				var st struct{ Status string }
				err = q.Execute(ctx, "query-status", nil, &st)
				if err == nil && st.Status != "running" {
					t.Errorf("status %q, want running", st.Status)
				}
				if v := q.Version(); v.String() != "7.2.22" || v.Package != "Debian test" {
					t.Errorf("version %v %q", v, v.Package)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if strings.Join(events, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %v, want %v", events, tc.events)
			}
		})
	}
}

// A QEMU that stops answering fails the command at the context's deadline
// and says the connection must be made again.
func TestDeadline(t *testing.T) {
	c := fakeQEMU(t, greeting, func(id float64, cmd string) []string {
		if cmd == "qmp_capabilities" {
			b, _ := json.Marshal(id)
			return []string{`{"return": {}, "id": ` + string(b) + `}`}
		}
		return nil // never answers
	})
	q, err := New(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = q.Execute(ctx, "stop", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "dial QEMU's QMP socket again") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline and the advice to reconnect", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v past a 200 ms deadline", d)
	}
}
