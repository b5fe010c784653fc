package bootparam

import (
	"reflect"
	"testing"
)

func TestSplitCmdline(t *testing.T) {
	got := SplitCmdline(` console=ttyS0  panic=-1 a="b c" "quoted key=v"   capsem.ip=198.18.0.2/24` + "\n")
	want := []string{"console=ttyS0", "panic=-1", "a=b c", "quoted key=v", "capsem.ip=198.18.0.2/24"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q", got)
	}
	if len(SplitCmdline("   ")) != 0 {
		t.Fatal("blank")
	}
}
