package ports

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		in, want, err, why string
	}{
		{"8080:80", "127.0.0.1:8080:80/tcp", "", "no host address: this host only"},
		{"8080:80/tcp", "127.0.0.1:8080:80/tcp", "", "tcp named"},
		{"0:3000", "127.0.0.1:0:3000/tcp", "", "0 takes a free host port"},
		{"0.0.0.0:8080:80", "0.0.0.0:8080:80/tcp", "", "every address, only when written"},
		{"192.168.1.5:80:80", "192.168.1.5:80:80/tcp", "", "one address"},
		{"[::1]:8080:80", "[::1]:8080:80/tcp", "", "IPv6 in brackets"},
		{"8080:80/udp", "", "only TCP", "UDP is not published"},
		{"8080:80/sctp", "", "unknown protocol", "nor anything else"},
		{"80", "", "want a host port and a guest port", "a guest port alone is ambiguous"},
		{"localhost:8080:80", "", "not an IP address", "a name is not resolved: what is listened on is what was written"},
		{"::1:8080:80", "", "want a host port", "IPv6 without brackets"},
		{"[::1]:[::2]:8080:80", "", "", "two host addresses"},
		{"8080:0", "", "0 is no port", "the guest port is never 0"},
		{"65536:80", "", "not a port number", "out of range"},
		{"080:80", "", "not a port number", "a leading zero is a typo"},
		{"-1:80", "", "not a port number", "negative"},
		{"[fe80::1%eth0]:80:80", "", "not an IPv6 address", "a zone is not taken"},
		{"", "", "want a host port", "empty"},
	} {
		sp, err := ParseSpec(c.in)
		switch {
		case c.want != "":
			if err != nil || sp.String() != c.want {
				t.Errorf("%q (%s): %v %v, want %s", c.in, c.why, sp, err, c.want)
				continue
			}
			if again, err := ParseSpec(sp.String()); err != nil || again != sp {
				t.Errorf("%q: its String %q reads back as %v %v", c.in, sp.String(), again, err)
			}
		case err == nil:
			t.Errorf("%q (%s): parsed as %v, want an error", c.in, c.why, sp)
		case !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "HOSTPORT:GUESTPORT"):
			t.Errorf("%q (%s): error %q, want it to say %q and the form", c.in, c.why, err, c.err)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"8080:80", "[::1]:0:80/tcp", "1.2.3.4:1:2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpec(s)
		if err != nil {
			return
		}
		if sp.GuestPort == 0 || !sp.HostIP.IsValid() {
			t.Fatalf("%q parsed as %v", s, sp)
		}
		if again, err := ParseSpec(sp.String()); err != nil || again != sp {
			t.Fatalf("%q: %q reads back as %v %v", s, sp.String(), again, err)
		}
	})
}

func TestSpecNames(t *testing.T) {
	parse := func(s string) Spec {
		sp, err := ParseSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	for _, c := range []struct {
		published, given string
		want             bool
		why              string
	}{
		{"8080:80", "8080:80", true, "as published"},
		{"8080:80", "8080:81", true, "the host port names it, whatever guest port is written"},
		{"8080:80", "127.0.0.1:8080:80/tcp", true, "the full form"},
		{"8080:80", "0.0.0.0:8080:80", false, "another host address"},
		{"0:80", "0:80", true, "a free-port spec, as published"},
		{"0:80", "0:81", false, "a free-port spec for another guest port"},
		{"8080:80", "0:80", false, "a free-port spec names only a free-port spec: never the port someone chose"},
	} {
		if got := parse(c.published).Names(parse(c.given)); got != c.want {
			t.Errorf("%s names %s: %v, want %v (%s)", c.given, c.published, got, c.want, c.why)
		}
	}
}
