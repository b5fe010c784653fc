package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runDoctor runs `capsem doctor` with args and returns its output and exit
// code.
func runDoctor(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	data := t.TempDir()
	cmd := exec.CommandContext(ctx, capsemBin, append([]string{"doctor", "--data", data, "--ca-dir", sharedCADir}, args...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("capsem doctor %q did not finish: %s", args, out)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("capsem doctor: %v", err)
	}
	checkNothingLeft(t, data, "capsem-doctor-") // the doctor's workspace is in a capsem-doctor-* directory
	return string(out), cmd.ProcessState.ExitCode()
}

// pytestCounts reads pytest's summary line ("120 passed, 2 skipped in 40.1s").
func pytestCounts(out string) map[string]int {
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(\d+) (passed|failed|skipped|error|errors|xfailed|xpassed|deselected)\b`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		counts[m[2]] = n
	}
	return counts
}

// TestDoctorPasses runs the whole in-guest suite: it must pass with at
// least 120 tests, no sandbox, network, MCP or HTTP/3 test skipped, at
// least 10 MCP tests passed (test_mcp.py has 23; the floor keeps the
// gateway's diagnostics from silently ceasing to run) and every HTTP/3
// test (test_http3.py has 8).
func TestDoctorPasses(t *testing.T) {
	needGuest(t)
	out, code := runDoctor(t, "-v")
	c := pytestCounts(out)
	t.Logf("capsem doctor: exit %d, %v", code, c)
	if code != 0 || c["failed"] > 0 || c["error"]+c["errors"] > 0 {
		t.Fatalf("capsem doctor failed (exit %d):\n%s", code, out)
	}
	if c["passed"] < 120 {
		t.Errorf("%d tests passed, want at least 120:\n%s", c["passed"], out)
	}
	passed := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		for _, f := range []string{"test_sandbox.py", "test_network.py", "test_mcp.py", "test_http3.py"} {
			if strings.Contains(line, f) && strings.Contains(line, "SKIPPED") {
				t.Errorf("a diagnostic of %s was skipped: %s", f, line)
			}
			if strings.Contains(line, f+"::") && strings.Contains(line, "PASSED") {
				passed[f]++
			}
		}
	}
	if passed["test_mcp.py"] < 10 {
		t.Errorf("%d MCP diagnostics passed, want at least 10", passed["test_mcp.py"])
	}
	if passed["test_http3.py"] < 8 {
		t.Errorf("%d HTTP/3 diagnostics passed, want 8", passed["test_http3.py"])
	}
}

// TestDoctorCatchesABrokenRule allows port 80 on purpose: the diagnostic
// that proves plain HTTP is blocked must fail, and the doctor with it.
func TestDoctorCatchesABrokenRule(t *testing.T) {
	needGuest(t)
	out, code := runDoctor(t, "--also-allow", "allowed.doctor.test:80", "-k", "port_80", "-v")
	c := pytestCounts(out)
	if code == 0 || c["failed"] == 0 {
		t.Fatalf("with port 80 allowed the doctor still passes (exit %d, %v):\n%s", code, c, out)
	}
	if !regexp.MustCompile(`test_\w*port_80\w*.* FAILED|FAILED .*port_80`).MatchString(out) {
		t.Errorf("the failing test is not the port-80 one:\n%s", out)
	}
}

// TestDoctorHost checks this machine: everything capsem run needs is here
// in CI, so every line is ok.
func TestDoctorHost(t *testing.T) {
	needGuest(t)
	out, err := exec.Command(capsemBin, "doctor", "--host", "--data", t.TempDir(), "--ca-dir", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("capsem doctor --host: %v\n%s", err, out)
	}
	for _, want := range []string{"ok   qemu", "ok   accelerator", "ok   agent", "ok   image", "ok   ca", "ok   store"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("capsem doctor --host lacks %q:\n%s", want, out)
		}
	}
}

// TestDoctorPicksUpAChangedTest: a diagnostic changed on disk runs as
// changed with --suite, with no image rebuild.
func TestDoctorPicksUpAChangedTest(t *testing.T) {
	needGuest(t)
	suite := t.TempDir()
	files, err := filepath.Glob("../guest/diagnostics/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite in ../guest/diagnostics: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "test_workflows.py" {
			b = append(b, []byte("\n\ndef test_changed_on_purpose_by_the_doctor_test():\n    assert 6 * 7 == 41, \"changed on purpose\"\n")...)
		}
		if err := os.WriteFile(filepath.Join(suite, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runDoctor(t, "--suite", suite, "-k", "changed_on_purpose")
	c := pytestCounts(out)
	if code == 0 || c["failed"] != 1 || !strings.Contains(out, "changed on purpose") {
		t.Fatalf("the changed test did not run as changed (exit %d, %v):\n%s", code, c, out)
	}
	if strings.Contains(out, "root filesystem:") || strings.Contains(out, "not built yet") {
		t.Errorf("the doctor rebuilt the image for a changed test:\n%s", out)
	}
}
