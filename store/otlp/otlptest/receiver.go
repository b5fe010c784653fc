// Package otlptest runs the OpenTelemetry Collector's own OTLP receiver
// for tests of capsem's audit stream, and reads back what it received. It
// is imported by tests only: it must never be linked into a capsem binary
// (it pulls in the Collector).
package otlptest

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// FreeAddr is a loopback address no one listens on, for a receiver.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs the receiver (OTLP/HTTP only) on addr, delivering to sink;
// Shutdown stops it.
func Start(t testing.TB, addr string, sink *consumertest.LogsSink) receiver.Logs {
	t.Helper()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return r
}

// Record is one log record the receiver got, with its resource's
// attributes.
type Record struct {
	Resource map[string]any
	Attrs    map[string]any
	Body     string
	Event    string // the event name
}

// Records are every record sink received, in order.
func Records(sink *consumertest.LogsSink) []Record {
	var out []Record
	for _, ld := range sink.AllLogs() {
		out = append(out, records(ld)...)
	}
	return out
}

func records(ld plog.Logs) []Record {
	var out []Record
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		res := rls.At(i).Resource().Attributes().AsRaw()
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				out = append(out, Record{Resource: res, Attrs: lr.Attributes().AsRaw(), Body: lr.Body().Str(), Event: lr.EventName()})
			}
		}
	}
	return out
}
