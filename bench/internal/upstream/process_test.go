package upstream

import (
	"os/exec"
	"testing"
)

func TestStart(t *testing.T) {
	for _, c := range []struct {
		script  string
		port    int
		wantErr bool
		why     string
	}{
		{"echo 4242; cat >/dev/null", 4242, false, "the first line is the port; it serves until stdin closes"},
		{"echo ' 80 '; cat >/dev/null", 80, false, "spaces around the port are not part of it"},
		{"echo listening; cat >/dev/null", 0, true, "a first line that is not a port is an error, and the process is killed"},
		{"exit 0", 0, true, "a process that exits without a line did not start"},
	} {
		p, err := Start(exec.Command("sh", "-c", c.script))
		if (err != nil) != c.wantErr {
			t.Errorf("Start(%q): err %v, want error %v: %s", c.script, err, c.wantErr, c.why)
			continue
		}
		if err != nil {
			continue
		}
		if p.Port != c.port {
			t.Errorf("Start(%q): port %d, want %d: %s", c.script, p.Port, c.port, c.why)
		}
		p.Stop()
		if !p.Cmd.ProcessState.Exited() {
			t.Errorf("Start(%q): still running after Stop: %s", c.script, c.why)
		}
	}
}
