package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// startUI runs `capsem ui --data data` and returns its URL.
func startUI(t *testing.T, data string) string {
	t.Helper()
	cmd := exec.Command(capsemBin, "ui", "--data", data, "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("capsem ui printed no URL: %v", err)
	}
	go io.Copy(io.Discard, out)
	return strings.TrimSpace(strings.TrimPrefix(line, "capsem ui: "))
}

func uiGet(url string) (string, http.Header, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), resp.Header, &httpStatusError{resp.Status}
	}
	return string(b), resp.Header, err
}

type httpStatusError struct{ status string }

func (e *httpStatusError) Error() string { return "HTTP " + e.status }

// TestUIFollowsARunningRun: while a capsem run goes on, capsem ui lists its
// session as running and its page's rows grow as the guest writes files;
// capsem sessions lists it as running too. Once the run ends the session
// is an ended one, with every file event.
func TestUIFollowsARunningRun(t *testing.T) {
	needGuest(t)
	data := t.TempDir()
	base := startUI(t, data)
	const ticks = 8
	script := `for i in $(seq 1 ` + "8" + `); do echo tick > /workspace/tick$i.txt; sleep 1; done`
	tickRows := regexp.MustCompile(`created tick\d\.txt`)

	var wg sync.WaitGroup
	var sessionID string
	var seenLive, grew, sessionsRunning bool
	var firstTicks, lastTicks int
	onStart := func(int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(90 * time.Second)
			for time.Now().Before(deadline) {
				time.Sleep(300 * time.Millisecond)
				list, _, err := uiGet(base)
				if err != nil || !strings.Contains(list, `class="live">running`) {
					continue
				}
				seenLive = true
				m := regexp.MustCompile(`/s/([0-9TZ-]+-[0-9a-f]+)"`).FindStringSubmatch(list)
				if m == nil {
					continue
				}
				sessionID = m[1]
				page, _, err := uiGet(base + "s/" + sessionID)
				if err != nil || !strings.Contains(page, `data-live="1"`) {
					continue
				}
				rows, _, err := uiGet(base + "s/" + sessionID + "/rows?kind=fs&after=0")
				if err != nil {
					continue
				}
				n := len(tickRows.FindAllString(rows, -1))
				if firstTicks == 0 && n > 0 && n < ticks {
					firstTicks = n
				}
				lastTicks = n
				if firstTicks > 0 && n > firstTicks {
					grew = true
				}
				if !sessionsRunning {
					out, err := exec.Command(capsemBin, "sessions", "--data", data, "--json").Output()
					var list []struct {
						ID      string `json:"id"`
						Running bool   `json:"running"`
					}
					if err == nil && json.Unmarshal(out, &list) == nil {
						for _, s := range list {
							sessionsRunning = sessionsRunning || (s.ID == sessionID && s.Running)
						}
					}
				}
				if grew && sessionsRunning {
					return
				}
			}
		}()
	}
	r := capsemRun(t, runOpts{data: data, onStart: onStart}, nil, "sh", "-c", script)
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("the run failed: exit %d\n%s", r.code, r.stderr)
	}
	if !seenLive || sessionID != r.session {
		t.Fatalf("capsem ui never listed the run as running (saw %q, the run was %s)", sessionID, r.session)
	}
	if !grew {
		t.Errorf("the running session's file rows did not grow: first %d, last %d of %d", firstTicks, lastTicks, ticks)
	}
	if !sessionsRunning {
		t.Errorf("capsem sessions did not list the running run as running")
	}
	// Ended: moved into the main store, listed with its exit code, all
	// its events there.
	time.Sleep(1500 * time.Millisecond) // capsem ui's refresh of the running ones
	page, _, err := uiGet(base + "s/" + r.session)
	if err != nil || strings.Contains(page, `data-live="1"`) {
		t.Errorf("the ended session's page: %v (still live: %v)", err, strings.Contains(page, `data-live="1"`))
	}
	rows, _, err := uiGet(base + "s/" + r.session + "/rows?kind=fs&after=0")
	if n := len(tickRows.FindAllString(rows, -1)); err != nil || n != ticks {
		t.Errorf("the ended session shows %d tick files (%v), want %d", n, err, ticks)
	}
}
