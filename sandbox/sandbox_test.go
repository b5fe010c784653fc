package sandbox

import "testing"

func TestGuestBoot(t *testing.T) {
	der := []byte{0x30, 0x82, 0x01, 0x00, 1, 2, 3}
	for _, c := range []struct {
		debug bool
		want  string
		why   string
	}{
		{false, "capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=1500 capsem.ca=MIIBAAECAw",
			"the static network (no DHCP round trip at boot) and the CA as base64 of its DER, in the order capsem run always wrote them"},
		{true, "capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=1500 capsem.ca=MIIBAAECAw capsem.debug=1",
			"a debug log level has the agent log its steps on the console"},
	} {
		if got := GuestBoot(1500, der, c.debug).String(); got != c.want {
			t.Errorf("GuestBoot(debug %v):\n got %s\nwant %s\n(%s)", c.debug, got, c.want, c.why)
		}
	}
}
