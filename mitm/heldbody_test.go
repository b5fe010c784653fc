package mitm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// stalledPost sends a POST over cc whose Content-Length is 1 MiB and whose
// body stops one byte short, as a guest holding the host's memory would;
// it returns the status and X-Capsem-Blocked the guest gets.
func stalledPost(cc *http2.ClientConn, path string) (int, string, error) {
	pr, pw := io.Pipe()
	defer pw.CloseWithError(errors.New("the test is done"))
	go pw.Write(make([]byte, 1<<20-1))
	req, _ := http.NewRequest("POST", "https://api.test"+path, pr)
	req.ContentLength = 1 << 20
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Capsem-Blocked"), nil
}

// TestHeldBodiesAreBounded: bodies the guard holds whole (DLP is on by
// default) take their bytes from the proxy's budget; past it a request is
// refused with a 503, a held body that stalls gets a 408 at the deadline,
// the budget comes back whole, and nothing is forwarded. Before the
// budget, every stream held its 1 MiB until the guest gave up.
func TestHeldBodiesAreBounded(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	tp.p.held.max = 3 << 20
	tp.p.cfg.HeldBodyDeadline = 2 * time.Second

	var (
		mu      sync.Mutex
		results = map[string]int{}
		wg      sync.WaitGroup
		ccs     []*http2.ClientConn
	)
	for range 2 {
		cc, err := (&http2.Transport{}).NewClientConn(tp.dial("h2"))
		if err != nil {
			t.Fatal(err)
		}
		ccs = append(ccs, cc)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, blocked, err := stalledPost(cc, fmt.Sprintf("/upload/%d", i))
				key := fmt.Sprintf("%d %s", status, blocked)
				if err != nil {
					key = "error " + err.Error()
				}
				mu.Lock()
				results[key]++
				mu.Unlock()
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var most int64
	giveUp := time.After(20 * time.Second)
	for waiting := true; waiting; {
		most = max(most, tp.p.held.used.Load())
		select {
		case <-done:
			waiting = false
		case <-time.After(time.Millisecond):
		case <-giveUp:
			mu.Lock()
			t.Fatalf("the stalled requests were never answered: %v", results)
		}
	}
	t.Logf("24 stalled 1 MiB bodies on two connections: %v, at most %d bytes held", results, most)
	if most > tp.p.held.max {
		t.Errorf("held %d bytes at most, over the budget of %d", most, tp.p.held.max)
	}
	if results["503 body-hold-budget"] == 0 || results["408 body-read-timeout"] == 0 || results["503 body-hold-budget"]+results["408 body-read-timeout"] != 24 {
		t.Errorf("24 stalled bodies over a 3 MiB budget: want 503 body-hold-budget and 408 body-read-timeout only, got %v", results)
	}
	if u := tp.p.held.used.Load(); u != 0 {
		t.Errorf("%d bytes still taken from the budget after every request ended", u)
	}
	if n := tp.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d of the stalled requests", n)
	}
	// The connections still serve, and say how many streams they allow.
	resp, err := ccs[0].RoundTrip(must(http.NewRequest("GET", "https://api.test/after", nil)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a request after the stalled ones: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := ccs[0].State().MaxConcurrentStreams; got != maxGuestStreams {
		t.Errorf("the guest's HTTP/2 connection allows %d streams, want %d", got, maxGuestStreams)
	}
	n := waitNet(t, rec, "/upload/0")
	if n.Reason != ReasonBodyHoldBudget && n.Reason != ReasonBodyTimeout {
		t.Errorf("the event of a stalled request: %s %s", n.Decision, n.Reason)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestHeldBodiesPerConnection: one guest connection holds at most
// maxHeldPerFlow however much the proxy has to spare.
func TestHeldBodiesPerConnection(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(hello))
	tp.p.cfg.HeldBodyDeadline = 2 * time.Second
	cc, err := (&http2.Transport{}).NewClientConn(tp.dial("h2"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		results = map[string]int{}
		wg      sync.WaitGroup
		most    int64
	)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				mu.Lock()
				most = max(most, tp.p.held.used.Load())
				mu.Unlock()
			}
		}
	}()
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, blocked, err := stalledPost(cc, fmt.Sprintf("/one/%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results["error"]++
				return
			}
			results[fmt.Sprintf("%d %s", status, blocked)]++
		}()
	}
	wg.Wait()
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("16 stalled 1 MiB bodies on one connection: %v, at most %d bytes held", results, most)
	if most > maxHeldPerFlow {
		t.Errorf("one connection held %d bytes, over %d", most, maxHeldPerFlow)
	}
	if results["503 body-hold-budget"] == 0 || results["408 body-read-timeout"] == 0 {
		t.Errorf("want both refusals, got %v", results)
	}
}

// TestHeldBodyGivenBackOnceForwarded: a held body's bytes go back to the
// budgets once the upstream has read it, not when its answer ends — a
// model's answer streams for minutes after its prompt went up.
func TestHeldBodyGivenBackOnceForwarded(t *testing.T) {
	release := make(chan struct{})
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: last\n\n")
	}))
	cc, err := (&http2.Transport{}).NewClientConn(tp.dial("h2"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "https://api.test/stream", bytes.NewReader(make([]byte, 1<<20)))
	req.ContentLength = 1 << 20
	resp, err := cc.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	defer resp.Body.Close()
	line := make([]byte, len("data: first\n\n"))
	if _, err := io.ReadFull(resp.Body, line); err != nil {
		t.Fatal(err)
	}
	// The answer is streaming; the prompt went up whole.
	if u := tp.p.held.used.Load(); u != 0 {
		t.Errorf("%d bytes still taken while the answer streams, after the body was forwarded", u)
	}
	close(release)
	io.Copy(io.Discard, resp.Body)
}
