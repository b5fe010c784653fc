package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
)

func TestListRemove(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	if ents, err := c.List(); err != nil || len(ents) != 0 {
		t.Fatalf("empty cache: %v, %v", ents, err)
	}
	build := func(content string) func(string) error {
		return func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o644)
		}
	}
	for _, e := range []struct{ kind, key, content string }{
		{"kernel", "aaaa1111", "kernel!"},
		{"rootfs", "aaaa2222", "rootfs"},
		{"rootfs", "bbbb3333", "r"},
		{"initramfs", "cccc4444", "init"},
	} {
		if _, err := c.Ensure(e.kind, e.key, build(e.content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(c.Downloads(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Downloads(), "linux.deb"), []byte("deb"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Leftovers of builds and fetches are not entries.
	os.MkdirAll(filepath.Join(c.Images(), "rootfs", ".build-x-1"), 0o755)
	os.MkdirAll(filepath.Join(c.Downloads(), ".fetch-1"), 0o755)

	ents, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Kind+"/"+e.Key)
		if e.Modified.IsZero() || e.Path == "" {
			t.Errorf("%+v: no time or path", e)
		}
	}
	want := "download/linux.deb initramfs/cccc4444 kernel/aaaa1111 rootfs/aaaa2222 rootfs/bbbb3333"
	if strings.Join(got, " ") != want {
		t.Fatalf("List = %v, want %s", got, want)
	}
	if ents[2].Size != int64(len("kernel!")) || ents[0].Size != 3 {
		t.Errorf("sizes: %+v", ents)
	}

	if err := c.Remove("aaaa"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if err := c.Remove("zzzz"); err == nil || !strings.Contains(err.Error(), "no entry") {
		t.Errorf("unknown key: %v", err)
	}
	if err := c.Remove(""); err == nil {
		t.Error("empty key accepted")
	}
	if err := c.Remove("aaaa2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("rootfs", "aaaa2222"); ok {
		t.Error("rootfs aaaa2222 still cached")
	}
	if err := c.Remove("linux.deb"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("aaaa"); err != nil { // now unique
		t.Fatal(err)
	}
	ents, _ = c.List()
	got = got[:0]
	for _, e := range ents {
		got = append(got, e.Kind+"/"+e.Key)
	}
	if strings.Join(got, " ") != "initramfs/cccc4444 rootfs/bbbb3333" {
		t.Errorf("after removals: %v", got)
	}
	// Nothing left behind under a temporary name either.
	left, _ := filepath.Glob(filepath.Join(c.Images(), "*", ".build-removed-*"))
	if len(left) != 0 {
		t.Errorf("leftovers: %v", left)
	}
}

func TestRebuild(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	write := func(s string) func(string) error {
		return func(dir string) error { return os.WriteFile(filepath.Join(dir, "f"), []byte(s), 0o644) }
	}
	d, err := c.Rebuild("rootfs", "k1", write("one")) // nothing cached: a plain build
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := c.Ensure("rootfs", "k1", write("two")); err != nil || d2 != d {
		t.Fatalf("Ensure: %s, %v", d2, err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "f")); string(b) != "one" {
		t.Fatalf("Ensure rebuilt a cached entry: %q", b)
	}
	if _, err := c.Rebuild("rootfs", "k1", write("three")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "f")); string(b) != "three" {
		t.Fatalf("after Rebuild: %q", b)
	}
	ents, _ := os.ReadDir(filepath.Join(c.Images(), "rootfs"))
	if len(ents) != 1 {
		t.Errorf("rootfs dir holds %d entries", len(ents))
	}
}

func TestFindDefaultEmpty(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	agent := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(agent, testVmlinux(0x1000), 0o755); err != nil {
		t.Fatal(err)
	}
	g, ok, err := c.FindDefault(agent, "")
	if err != nil || ok || g != nil {
		t.Fatalf("empty cache: %v, %v, %v", g, ok, err)
	}
	if _, _, err := c.FindDefault("/nonexistent/agent", ""); err == nil {
		t.Error("missing agent accepted")
	}
}

// TestListArch: `capsem image ls` says what each entry is built for, from
// the manifests the builds write (and a download's .deb name).
func TestListArch(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(c.Images(), "kernel", "k1", "manifest.json"), `{"package":"linux-image-6.1.0-56-arm64:arm64=6.1.192-2","arch":"arm64"}`)
	write(filepath.Join(c.Images(), "kernel", "k2", "manifest.json"), `{"package":"linux-image-6.1.0-56-amd64=6.1.192-2"}`)
	write(filepath.Join(c.Images(), "rootfs", "r1", "manifest.json"), `{"recipe":{"Arch":"arm64","Suite":"bookworm"}}`)
	write(filepath.Join(c.Images(), "rootfs", "r2", "manifest.json"), `{"recipe":{"Arch":"","Suite":"bookworm"}}`)
	write(filepath.Join(c.Images(), "initramfs", "i1", "initramfs.cpio"), "x")
	if err := writeArchManifest(filepath.Join(c.Images(), "initramfs", "i1"), arch.ARM64); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(c.Images(), "initramfs", "i2", "initramfs.cpio"), "x")
	write(filepath.Join(c.Downloads(), "linux-image-6.1.0-56-arm64_6.1.192-2_arm64.deb"), "x")
	ents, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Kind+" "+e.Key+" "+string(e.Arch))
	}
	want := []string{
		"download linux-image-6.1.0-56-arm64_6.1.192-2_arm64.deb arm64",
		"initramfs i1 arm64",
		"initramfs i2 amd64", // written before arm64 existed: no manifest
		"kernel k1 arm64",
		"kernel k2 amd64", // a manifest without arch is amd64's
		"rootfs r1 arm64",
		"rootfs r2 amd64",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("List:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
