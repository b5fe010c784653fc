package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/store"
)

// The record of what happens in the guest. The host trusts only itself:
// exec_events are built from the Exec it sent and the Exit it received
// (the agent's own ExecEvent is ignored: a guest that holds the agent's port
// could send one for a command the host never started); file events are the
// guest's report, stored with the host's receive time beside the time the
// guest claimed, under a rate limit and with capped paths; and a watchdog
// pings the agent so that a guest whose agent stopped reporting says so.

// Limits on guest-reported file events. An `npm install` of a mid-sized
// project makes ~30k workspace events in a few seconds, so the burst is
// large; a guest that keeps reporting beyond the rate loses the excess to
// one rate-limited event per second with the count. At ~100 bytes an
// event, the sustained rate is ~720 MB an hour at most, under the session's
// byte budget.
const (
	fsEventsPerSecond = 2000
	fsEventsBurst     = 50_000
	// maxReportedPath caps a reported path (PATH_MAX); longer ones are cut
	// and counted as capped.
	maxReportedPath = 4096
)

// Watchdog timing. Under TCG a busy guest answers a ping in well under a
// second (measured: 2–40 ms with pytest running); 15 s of silence is not
// load.
const (
	pingEvery   = 5 * time.Second
	silentAfter = 15 * time.Second
)

// guestRecord turns the agent's reports into store events.
type guestRecord struct {
	rec   netstack.Recorder
	log   *slog.Logger
	execs sync.WaitGroup // exec records not yet appended

	mu        sync.Mutex
	silent    bool // the agent's last ping went unanswered
	tokens    float64
	last      time.Time // when tokens were last refilled
	dropped   int64     // file events dropped since the last rate-limited event
	capped    int64     // paths cut since the last capped event
	lastFlush time.Time
}

func newGuestRecord(rec netstack.Recorder, log *slog.Logger) *guestRecord {
	now := time.Now()
	return &guestRecord{rec: rec, log: log, tokens: fsEventsBurst, last: now, lastFlush: now}
}

// fileEvent records one reported change, stamped with the host's time,
// unless it is over the rate limit (then it is counted).
func (g *guestRecord) fileEvent(m proto.FileEvent) {
	now := time.Now()
	g.mu.Lock()
	g.tokens = min(fsEventsBurst, g.tokens+now.Sub(g.last).Seconds()*fsEventsPerSecond)
	g.last = now
	ok := g.tokens >= 1
	if ok {
		g.tokens--
	} else {
		g.dropped++
	}
	path, cut1 := capString(m.Path, maxReportedPath)
	old, cut2 := capString(m.OldPath, maxReportedPath)
	action, known := fsActions[m.Action]
	if !known {
		action = "unknown" // the guest's word, up to a frame long, is not kept
	}
	if ok && (cut1 || cut2 || !known) {
		g.capped++
	}
	flush := now.Sub(g.lastFlush) >= time.Second
	g.mu.Unlock()
	if flush {
		g.flush()
	}
	if !ok {
		return
	}
	ev := &store.FS{Action: action, Path: path, OldPath: old, Size: m.Size, Dir: m.Dir}
	if m.Time != 0 {
		ev.GuestTime = time.Unix(0, m.Time)
	}
	g.rec.Append(store.Event{Time: now, FS: ev})
}

// fsActions are the actions a file event may report, as stored.
var fsActions = map[string]string{
	proto.ActionCreated: store.FSCreated, proto.ActionModified: store.FSModified, proto.ActionDeleted: store.FSDeleted,
	proto.ActionRenamed: store.FSRenamed, proto.ActionOverflow: store.FSOverflow,
}

func capString(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	return s[:n], true
}

// flush records the counts of dropped and cut reports, if any.
func (g *guestRecord) flush() {
	g.mu.Lock()
	dropped, capped := g.dropped, g.capped
	g.dropped, g.capped = 0, 0
	g.lastFlush = time.Now()
	g.mu.Unlock()
	if dropped > 0 {
		g.agent(store.AgentRateLimited, dropped, fmt.Sprintf("file events beyond %d/s (burst %d) were not recorded", fsEventsPerSecond, fsEventsBurst))
	}
	if capped > 0 {
		g.agent(store.AgentCapped, capped, fmt.Sprintf("file events with a path longer than %d bytes (cut) or an unknown action (stored as \"unknown\")", maxReportedPath))
	}
}

func (g *guestRecord) agent(state string, count int64, detail string) {
	g.rec.Append(store.Event{Agent: &store.Agent{State: state, Count: count, Detail: detail}})
}

// execStarted records a command once it ends, from what the host sent and
// saw: argv, dir and tty of its Exec, the times by the host's clock, the
// pid the agent gave in Started, and the Exit (or -1 when the guest went
// away before saying).
func (g *guestRecord) execStarted(s *proto.Session) {
	g.execs.Add(1)
	go func() {
		defer g.execs.Done()
		<-s.Done()
		exit, err := s.Wait()
		ex := s.Exec()
		sent, ended := s.Times()
		rec := &store.Exec{
			Argv: ex.Argv, Dir: ex.Dir, TTY: ex.TTY, PID: s.PID(),
			Start: sent, Duration: ended.Sub(sent),
			ExitCode: exit.Code, Signal: exit.Signal,
		}
		var perr proto.Error
		switch {
		case err == nil:
		case errors.As(err, &perr) && perr.Code != 0:
			rec.ExitCode = perr.Code
		default:
			rec.ExitCode = -1
		}
		g.rec.Append(store.Event{Time: ended, Exec: rec})
	}()
}

// wait returns once every command that has ended is recorded.
func (g *guestRecord) wait() { g.execs.Wait() }

// execFailed records a command the guest could not start.
func (g *guestRecord) execFailed(ex proto.Exec, sent time.Time, err error) {
	rec := &store.Exec{Argv: ex.Argv, Dir: ex.Dir, TTY: ex.TTY, Start: sent, Duration: time.Since(sent), ExitCode: -1}
	var perr proto.Error
	if errors.As(err, &perr) && perr.Code != 0 {
		rec.ExitCode = perr.Code
	}
	g.rec.Append(store.Event{Exec: rec})
}

// setSilent records the agent going silent (why says how it showed) or
// answering again, once per change: the watchdog and the probes before a
// signal's confirmation and a shutdown share it.
func (g *guestRecord) setSilent(silent bool, why string) {
	g.mu.Lock()
	changed := g.silent != silent
	g.silent = silent
	g.mu.Unlock()
	switch {
	case changed && silent:
		g.agent(store.AgentSilent, 1, why)
		g.log.Warn("the guest agent stopped answering", "why", why)
	case changed:
		g.agent(store.AgentResumed, 1, "the agent answered a ping again")
	}
}

// isSilent reports whether the agent's last ping went unanswered.
func (g *guestRecord) isSilent() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.silent
}

// watch pings the agent until ctx ends or the connection does, recording
// when it goes silent and when it answers again; at the end it records a
// protocol violation, if that is why the connection ended, and calls
// onViolation. Rate-limit counts still pending are recorded last.
func (g *guestRecord) watch(ctx context.Context, client *proto.Client, onViolation func(error)) {
	defer g.flush()
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-client.Done():
			if err := client.Err(); errors.Is(err, proto.ErrViolation) {
				g.agent(store.AgentViolation, 1, err.Error())
				g.log.Error("the guest agent broke the control protocol; the guest is stopped", "err", err)
				onViolation(err)
			}
			return
		case <-t.C:
			g.flush()
			pctx, cancel := context.WithTimeout(ctx, silentAfter)
			_, err := client.Ping(pctx)
			cancel()
			switch {
			case err == nil:
				g.setSilent(false, "")
			case errors.Is(err, context.DeadlineExceeded):
				g.setSilent(true, fmt.Sprintf("the agent did not answer a ping within %s: nothing it reports can be expected", silentAfter))
			}
		}
	}
}
