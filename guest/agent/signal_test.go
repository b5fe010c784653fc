//go:build linux

package agent

import (
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"INT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "kill": syscall.SIGKILL, "10": syscall.SIGUSR1, " hup ": syscall.SIGHUP, "WINCH": syscall.SIGWINCH} {
		got, err := ParseSignal(in)
		if err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "NOPE", "0", "99", "-1"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q) succeeded", bad)
		}
	}
	if SignalName(syscall.SIGINT) != "INT" || SignalName(syscall.Signal(99)) != "99" {
		t.Fatal(SignalName(syscall.SIGINT), SignalName(syscall.Signal(99)))
	}
}
