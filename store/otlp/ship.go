package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/version"
)

// Defaults of Config.
const (
	// DefaultBacklog is how many events the stream may fall behind before
	// it is an event (and, --audit-required, a refusal): ~15 minutes of a
	// busy agent (~100 events/s), far more than a collector's restart.
	DefaultBacklog = 100_000
	// DefaultPoll is how often the Shipper looks for new events when it
	// has sent them all: events reach the collector within about this
	// long of being synced.
	DefaultPoll = 250 * time.Millisecond
	// batchMax is the most events one export carries: the SDK's default
	// batch size, ~100 KiB of records.
	batchMax = 512
	// maxBackoff caps the wait between attempts while the collector fails.
	maxBackoff = 10 * time.Second
	// catchUpShare is the share of one core the stream takes while it
	// catches up (full batches back to back): after each it rests as long
	// as makes the batch this share of the time. Flat out, the stream and
	// a collector beside it took about one of the test machine's two
	// cores (~115k events/s delivered) and cut ingest ~45%; at 0.15 ~11%
	// (16k/s delivered); at 0.1 3.5–9.5% (10k/s delivered: two orders of
	// magnitude above an agent's rate; docs/BENCHMARKS.md, bench:store).
	// An agent's events never fill a batch, so they are not paced at all.
	catchUpShare = 0.1
)

// Config says where and how to stream.
type Config struct {
	// URL is the collector's OTLP/HTTP endpoint: http(s)://HOST:PORT, with
	// the path /v1/logs added when it has none.
	URL string
	// Resource attributes naming where the events come from (sandbox,
	// session, host); service.name is "capsem" and service.version its.
	Resource map[string]string
	// Backlog: past this many unsent events, Behind(true) is called and a
	// recording event written; Behind(false) when the stream catches up.
	// Zero means DefaultBacklog.
	Backlog uint64
	// Poll: zero means DefaultPoll.
	Poll time.Duration
	// Behind is told when the stream falls behind Backlog and when it
	// catches up; nil: nothing but the event and a log line.
	Behind func(behind bool, why error)
	// Required: the session must not run unaudited (--audit-required):
	// while the stream is behind Backlog, the writer's Admit refuses new
	// flows and requests, as for a full store.
	Required bool
	// Log receives a line when sending fails and when it recovers; nil:
	// slog.Default().
	Log *slog.Logger
}

// Writer is what the Shipper needs of the session's writer: how far it
// has appended, and a way to record that the stream fell behind.
type Writer interface {
	ID() string
	Seq() uint64
	Sync() error
	Append(store.Event)
	SetRefusal(error)
}

// Shipper streams one session's events.
type Shipper struct {
	st   *store.Store
	w    Writer
	cfg  Config
	exp  *otlploghttp.Exporter
	prov *sdklog.LoggerProvider
	lg   otellog.Logger
	col  *collector

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	sent    uint64 // the last seq the collector acknowledged
	behind  bool
	lastErr error
}

// collector is the Processor the Shipper's logger emits into: it keeps
// the records of the batch being built, for the Shipper to export itself
// (the SDK's batch processor would drop them on a failed export).
type collector struct{ recs []sdklog.Record }

func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collector) Shutdown(context.Context) error                         { return nil }
func (c *collector) ForceFlush(context.Context) error                       { return nil }

// endpoint checks u and adds the OTLP logs path when it has none.
func endpoint(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "", fmt.Errorf("otlp: %q: write the collector's OTLP/HTTP endpoint, like http://collector:4318", u)
	}
	if p.Path == "" || p.Path == "/" {
		p.Path = "/v1/logs"
	}
	return p.String(), nil
}

// ResourceOf names a session for the collector: its id, its sandbox
// ("" for a capsem run) and its host.
func ResourceOf(s store.Session) map[string]string {
	r := map[string]string{"capsem.session": s.ID, "host.name": s.Host}
	if s.Sandbox != "" {
		r["capsem.sandbox"] = s.Sandbox
	}
	return r
}

// Start begins streaming the events of w's session in st to cfg.URL.
func Start(st *store.Store, w Writer, cfg Config) (*Shipper, error) {
	u, err := endpoint(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Backlog == 0 {
		cfg.Backlog = DefaultBacklog
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	// The SDK's own retry gives up after a minute and does not retry a
	// refused connection: the Shipper retries, for as long as it takes.
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(u),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}), otlploghttp.WithTimeout(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "capsem"), attribute.String("service.version", version.Number)}
	for k, v := range cfg.Resource {
		attrs = append(attrs, attribute.String(k, v))
	}
	res, err := resource.New(context.Background(), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	col := &collector{}
	prov := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(col))
	s := &Shipper{st: st, w: w, cfg: cfg, exp: exp, prov: prov, col: col,
		lg: prov.Logger("capsem", otellog.WithInstrumentationVersion(version.Number)), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s, nil
}

// Sent is the seq of the last event the collector acknowledged.
func (s *Shipper) Sent() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

func (s *Shipper) run() {
	defer close(s.done)
	backoff := s.cfg.Poll
	for {
		t0 := time.Now()
		n, err := s.step()
		wait := s.cfg.Poll
		switch {
		case err != nil:
			s.failed(err)
			backoff = min(max(2*backoff, time.Second), maxBackoff)
			wait = backoff
		case n == batchMax:
			backoff = s.cfg.Poll
			wait = time.Duration(float64(time.Since(t0)) * (1 - catchUpShare) / catchUpShare) // more are waiting
		default:
			backoff = s.cfg.Poll
		}
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
	}
}

// errBatchFull ends a walk of the store at batchMax events.
var errBatchFull = errors.New("batch full")

// step sends the next batch of events, if any, and returns how many it
// sent.
func (s *Shipper) step() (int, error) {
	s.col.recs = s.col.recs[:0]
	last := s.Sent()
	err := s.st.EventsAfter(s.w.ID(), last, func(ev store.Event) error {
		s.lg.Emit(context.Background(), record(&ev))
		last = ev.Seq
		if len(s.col.recs) == batchMax {
			return errBatchFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errBatchFull) {
		return 0, fmt.Errorf("reading the store: %w", err)
	}
	if len(s.col.recs) == 0 {
		s.check(nil)
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exp.Export(ctx, s.col.recs); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.sent = last
	recovered := s.lastErr != nil
	s.lastErr = nil
	s.mu.Unlock()
	if recovered {
		s.cfg.Log.Info("audit: the collector accepts events again", "url", s.cfg.URL, "sent", last)
	}
	s.check(nil)
	return len(s.col.recs), nil
}

// failed notes an export that failed.
func (s *Shipper) failed(err error) {
	s.mu.Lock()
	first := s.lastErr == nil
	s.lastErr = err
	s.mu.Unlock()
	if first {
		s.cfg.Log.Warn("audit: sending events to the collector failed; retrying, they wait in the store", "url", s.cfg.URL, "err", err)
	}
	s.check(err)
}

// check compares the backlog with its bound, and records and says so when
// it crosses it either way.
func (s *Shipper) check(err error) {
	backlog := s.w.Seq() - s.Sent()
	s.mu.Lock()
	was := s.behind
	now := backlog > s.cfg.Backlog
	if now == was {
		s.mu.Unlock()
		return
	}
	s.behind = now
	s.mu.Unlock()
	var why error
	ev := store.Recording{State: store.RecordingAuditResumed,
		Detail: fmt.Sprintf("the audit stream to %s caught up (%d events behind)", s.cfg.URL, backlog)}
	if now {
		why = fmt.Errorf("the audit stream to %s is %d events behind (more than %d): %v", s.cfg.URL, backlog, s.cfg.Backlog, err)
		ev = store.Recording{State: store.RecordingAuditBehind, Detail: why.Error(), Count: int64(backlog)}
		s.cfg.Log.Error("audit: "+why.Error(), "url", s.cfg.URL)
	}
	s.w.Append(store.Event{Kind: store.KindRecording, Recording: &ev})
	if s.cfg.Required {
		s.w.SetRefusal(why) // nil when caught up
	}
	if s.cfg.Behind != nil {
		s.cfg.Behind(now, why)
	}
}

// closeStall is how long Close waits on a collector that is failing and
// takes nothing: a down collector does not hold a run's exit for the
// whole timeout (its events are in the store).
const closeStall = 5 * time.Second

// Close sends what the session has appended, waiting at most timeout for
// the collector (closeStall when it fails and takes nothing), then stops.
// It returns how many events were left unsent (they are in the store:
// capsem export).
func (s *Shipper) Close(timeout time.Duration) (unsent uint64, err error) {
	_ = s.w.Sync() // what was appended is readable
	target := s.w.Seq()
	deadline := time.Now().Add(timeout)
	last, moved := s.Sent(), time.Now()
	for s.Sent() < target && time.Now().Before(deadline) {
		if sent := s.Sent(); sent != last {
			last, moved = sent, time.Now()
		}
		s.mu.Lock()
		failing := s.lastErr != nil
		s.mu.Unlock()
		if failing && time.Since(moved) > closeStall {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(s.stop)
	<-s.done
	_ = s.exp.Shutdown(context.Background())
	_ = s.prov.Shutdown(context.Background())
	if sent := s.Sent(); sent < target {
		s.mu.Lock()
		err = s.lastErr
		s.mu.Unlock()
		return target - sent, fmt.Errorf("otlp: %d events of session %s were not delivered to %s (%v); they are in the store: capsem export --session %s",
			target-sent, s.w.ID(), s.cfg.URL, err, s.w.ID())
	}
	return 0, nil
}

// record is ev as an OpenTelemetry log record: its time, the event's name
// (capsem.<kind>), the session and seq, the decision and reason when it
// has them, and the event itself as the JSON body.
func record(ev *store.Event) otellog.Record {
	var r otellog.Record
	r.SetTimestamp(ev.Time)
	r.SetObservedTimestamp(ev.Time)
	r.SetEventName("capsem." + string(ev.Kind))
	r.SetSeverity(otellog.SeverityInfo)
	attrs := []attribute.KeyValue{
		attribute.String("capsem.session", ev.Session),
		attribute.Int64("capsem.seq", int64(ev.Seq)),
		attribute.String("capsem.kind", string(ev.Kind)),
	}
	if d, reason := decision(ev); d != "" {
		attrs = append(attrs, attribute.String("capsem.decision", string(d)))
		if reason != "" {
			attrs = append(attrs, attribute.String("capsem.reason", reason))
		}
		if d == store.Denied {
			r.SetSeverity(otellog.SeverityWarn)
		}
	}
	r.AddAttributes(attrs...)
	b, _ := json.Marshal(ev)
	r.SetBody(attribute.StringValue(strings.ToValidUTF8(string(b), "\uFFFD")))
	return r
}

func decision(ev *store.Event) (store.Decision, string) {
	switch {
	case ev.DNS != nil:
		return ev.DNS.Decision, ev.DNS.Reason
	case ev.Net != nil:
		return ev.Net.Decision, ev.Net.Reason
	case ev.MCPCall != nil:
		return ev.MCPCall.Decision, ev.MCPCall.Reason
	}
	return "", ""
}
