package boot

import (
	"reflect"
	"testing"
)

func TestParseModuleList(t *testing.T) {
	data := []byte(`# capsem.order
kernel/drivers/virtio/virtio_mmio.ko  virtio_mmio.device=4K@0xd0000000:5
virtio_net.ko.xz
/abs/path/9p.ko.zst debug=0 other=1 # trailing comment
failover.ko net_failover.ko
`)
	got, err := ParseModuleList(data, "/lib/modules")
	if err != nil {
		t.Fatal(err)
	}
	want := []Module{
		{Path: "/lib/modules/kernel/drivers/virtio/virtio_mmio.ko", Params: "virtio_mmio.device=4K@0xd0000000:5"},
		{Path: "/lib/modules/virtio_net.ko.xz"},
		{Path: "/abs/path/9p.ko.zst", Params: "debug=0 other=1"},
		{Path: "/lib/modules/failover.ko"},
		{Path: "/lib/modules/net_failover.ko"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	names := []string{}
	for _, m := range got {
		names = append(names, m.Name())
	}
	if !reflect.DeepEqual(names, []string{"virtio_mmio", "virtio_net", "9p", "failover", "net_failover"}) {
		t.Fatal(names)
	}
	if got[0].Compressed() || !got[1].Compressed() || !got[2].Compressed() {
		t.Fatal("compressed")
	}
	for _, bad := range []string{"debug=1 virtio.ko", "notamodule\n"} {
		if _, err := ParseModuleList([]byte(bad), "/"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if m, err := ParseModuleList(nil, "/"); err != nil || len(m) != 0 {
		t.Fatal("empty list")
	}
}
