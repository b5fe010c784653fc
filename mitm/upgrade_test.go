package mitm

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const testWSKey = "dGhlIHNhbXBsZSBub25jZQ=="

func wsHeader(extra ...string) http.Header {
	h := http.Header{
		"Upgrade":               {"websocket"},
		"Connection":            {"Upgrade"},
		"Sec-Websocket-Key":     {testWSKey},
		"Sec-Websocket-Version": {"13"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(h, extra[i])
		} else {
			h[extra[i]] = strings.Split(extra[i+1], "\n")
		}
	}
	return h
}

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		http10   bool
		h        http.Header
		wantWS   bool
		stripped string      // detail must contain it ("" = no detail)
		want     http.Header // the header afterwards
		why      string
	}{
		{name: "plain", method: "GET", h: http.Header{"Accept": {"*/*"}}, want: http.Header{"Accept": {"*/*"}},
			why: "a request with no upgrade is left alone"},
		{name: "websocket", method: "GET", h: wsHeader(), wantWS: true, want: wsHeader(),
			why: "a valid WebSocket handshake passes as it is"},
		{name: "websocket-case", method: "GET", h: wsHeader("Upgrade", " WebSocket ", "Connection", "keep-alive, UPGRADE"), wantWS: true,
			want: wsHeader("Upgrade", "WebSocket", "Connection", "keep-alive, UPGRADE"),
			why:  "tokens compare without case and around whitespace; the guest's spelling is kept"},
		{name: "h2c", method: "GET", h: http.Header{"Upgrade": {"h2c"}, "Connection": {"Upgrade, HTTP2-Settings"}, "Http2-Settings": {"AAMAAABkAAQAoAAAAAIAAAAA"}},
			stripped: "Upgrade: h2c, HTTP2-Settings", want: http.Header{},
			why: "h2c (RFC 7540 §3.2) would hand the connection to HTTP/2 capsem does not parse"},
		{name: "h2c-keeps-other-connection-tokens", method: "GET", h: http.Header{"Upgrade": {"h2c"}, "Connection": {"keep-alive,\tUpgrade ,HTTP2-Settings"}},
			stripped: "Upgrade: h2c", want: http.Header{"Connection": {"keep-alive"}},
			why: "only the upgrade's tokens leave Connection"},
		{name: "settings-alone", method: "GET", h: http.Header{"Http2-Settings": {"x"}},
			stripped: "HTTP2-Settings", want: http.Header{},
			why: "HTTP2-Settings is stripped even with no Upgrade (and from HTTP/2 requests)"},
		{name: "upgrade-without-connection", method: "GET", h: http.Header{"Upgrade": {"foo"}},
			stripped: "Upgrade: foo", want: http.Header{},
			why: "lax servers switch without Connection: upgrade"},
		{name: "tls", method: "GET", h: http.Header{"Upgrade": {"TLS/1.2"}, "Connection": {"Upgrade"}},
			stripped: "Upgrade: TLS/1.2", want: http.Header{},
			why: "RFC 2817"},
		{name: "two-lines", method: "GET", h: wsHeader("Upgrade", "websocket\nh2c"), wantWS: true, stripped: "Upgrade: h2c",
			want: wsHeader(), why: "every Upgrade line counts, not only the first the reverse proxy forwards"},
		{name: "list-with-websocket", method: "GET", h: wsHeader("Upgrade", "h2c, websocket"), wantWS: true, stripped: "Upgrade: h2c",
			want: wsHeader(), why: "websocket is kept from a list, the rest stripped"},
		{name: "websocket-twice", method: "GET", h: wsHeader("Upgrade", "websocket, websocket"), wantWS: true, stripped: "Upgrade: websocket",
			want: wsHeader(), why: "one websocket token is offered upstream"},
		{name: "ws-no-key", method: "GET", h: wsHeader("Sec-Websocket-Key", ""), stripped: "Upgrade: websocket",
			want: http.Header{"Sec-Websocket-Version": {"13"}}, why: "no key, no proof the answer read the handshake"},
		{name: "ws-bad-key", method: "GET", h: wsHeader("Sec-Websocket-Key", "c2hvcnQ="), stripped: "16 bytes",
			want: http.Header{"Sec-Websocket-Key": {"c2hvcnQ="}, "Sec-Websocket-Version": {"13"}}, why: "RFC 6455 §4.1: 16 random bytes"},
		{name: "ws-two-keys", method: "GET", h: wsHeader("Sec-Websocket-Key", testWSKey+"\n"+testWSKey), stripped: "exactly one Sec-WebSocket-Key",
			want: http.Header{"Sec-Websocket-Key": {testWSKey, testWSKey}, "Sec-Websocket-Version": {"13"}}, why: "which key would the answer prove?"},
		{name: "ws-no-version", method: "GET", h: wsHeader("Sec-Websocket-Version", ""), stripped: "Sec-WebSocket-Version",
			want: http.Header{"Sec-Websocket-Key": {testWSKey}}, why: "RFC 6455 §4.1"},
		{name: "ws-post", method: "POST", h: wsHeader(), stripped: "not GET",
			want: http.Header{"Sec-Websocket-Key": {testWSKey}, "Sec-Websocket-Version": {"13"}}, why: "a handshake is a GET"},
		{name: "ws-http10", method: "GET", http10: true, h: wsHeader(), stripped: "not HTTP/1.1",
			want: http.Header{"Sec-Websocket-Key": {testWSKey}, "Sec-Websocket-Version": {"13"}}, why: "HTTP/1.0 has no Upgrade"},
		{name: "ws-no-connection-token", method: "GET", h: wsHeader("Connection", "keep-alive"), stripped: "Connection does not list upgrade",
			want: http.Header{"Connection": {"keep-alive"}, "Sec-Websocket-Key": {testWSKey}, "Sec-Websocket-Version": {"13"}},
			why:  "Go's reverse proxy would drop it anyway; a lax upstream would not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkUpgrade(tc.method, !tc.http10, tc.h)
			if (c.wsKey != "") != tc.wantWS {
				t.Errorf("wsKey = %q, want websocket %v (%s)", c.wsKey, tc.wantWS, tc.why)
			}
			if d := c.detail(); (tc.stripped == "") != (d == "") || !strings.Contains(d, tc.stripped) {
				t.Errorf("detail %q, want it to say %q (%s)", d, tc.stripped, tc.why)
			}
			if !reflect.DeepEqual(tc.h, tc.want) {
				t.Errorf("header afterwards %v, want %v (%s)", tc.h, tc.want, tc.why)
			}
		})
	}
}

func TestRefuseTunnel(t *testing.T) {
	for _, tc := range []struct {
		method string
		h      http.Header
		refuse bool
		why    string
	}{
		{"GET", nil, false, "an ordinary request"},
		{"OPTIONS", nil, false, "OPTIONS * is no tunnel"},
		{"CONNECT", nil, true, "a tunnel"},
		{"connect", nil, true, "an upstream may read methods without case"},
		{"PRI", nil, true, "h2c with prior knowledge smuggled in as an HTTP/1.1 request"},
		{"CONNECT", http.Header{":protocol": {"websocket"}}, true, "extended CONNECT (RFC 8441) when the HTTP/2 server accepts it"},
		{"GET", http.Header{":protocol": {"x"}}, true, ":protocol on any method"},
	} {
		r := &http.Request{Method: tc.method, Header: tc.h}
		if got := refuseTunnel(r) != ""; got != tc.refuse {
			t.Errorf("%s %v: refused %v, want %v (%s)", tc.method, tc.h, got, tc.refuse, tc.why)
		}
	}
}

func TestRefuseSwitch(t *testing.T) {
	good := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}, "Sec-Websocket-Accept": {wsAccept(testWSKey)}}
	with := func(k, v string) http.Header {
		h := good.Clone()
		if v == "" {
			delete(h, k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	if wsAccept(testWSKey) != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("wsAccept: %s, want RFC 6455's example", wsAccept(testWSKey))
	}
	for _, tc := range []struct {
		name  string
		key   string
		h     http.Header
		allow bool
		why   string
	}{
		{"websocket", testWSKey, good, true, "a handshake answered as one"},
		{"websocket-case", testWSKey, with("Upgrade", "WebSocket"), true, "tokens compare without case"},
		{"not-asked", "", good, false, "the request was no permitted handshake"},
		{"not-asked-bare", "", http.Header{}, false, "a 101 naming nothing"},
		{"wrong-accept", testWSKey, with("Sec-Websocket-Accept", wsAccept("another key")), false, "the upstream did not read this handshake"},
		{"no-accept", testWSKey, with("Sec-Websocket-Accept", ""), false, "no proof"},
		{"other-protocol", testWSKey, with("Upgrade", "h2c"), false, "switched to something else"},
		{"list", testWSKey, with("Upgrade", "websocket, h2c"), false, "a 101 names the one protocol switched to"},
		{"no-connection", testWSKey, with("Connection", ""), false, "RFC 6455 §4.2.2"},
	} {
		err := refuseSwitch(tc.key, tc.h)
		if (err == nil) != tc.allow {
			t.Errorf("%s: refuseSwitch = %v, want allowed %v (%s)", tc.name, err, tc.allow, tc.why)
		}
		var sw *switchRefused
		if err != nil && (!errors.As(err, &sw) || !strings.Contains(err.Error(), "101")) {
			t.Errorf("%s: %v is not a switchRefused naming the 101", tc.name, err)
		}
	}
}

func TestStripLookalikes(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want []string
		why  string
	}{
		{http.Header{"Transfer_encoding": {"chunked"}, "Content-Length": {"5"}}, []string{"Transfer_encoding"}, "TE behind CL for an upstream that maps _ to -"},
		{http.Header{"Content_length": {"0"}}, []string{"Content_length"}, "a second length"},
		{http.Header{"Content_length_": {"0"}}, nil, "not a framing name either way"},
		{http.Header{"Upgrade_": {"h2c"}, "Http2_settings": {"x"}, "Host_": {"x"}}, []string{"Http2_settings"}, "only exact lookalikes"},
		{http.Header{"X_api_key": {"k"}, "Accept": {"*/*"}}, nil, "other underscores are ordinary"},
	} {
		if got := stripLookalikes(tc.h); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("stripLookalikes = %q, want %q (%s)", got, tc.want, tc.why)
		}
		for _, k := range tc.want {
			if _, ok := tc.h[k]; ok {
				t.Errorf("%s is still there (%s)", k, tc.why)
			}
		}
	}
}
