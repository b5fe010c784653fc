//go:build linux

package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A normal user builds the root filesystem in a user namespace of its own
// where it is root: `unshare --user --map-root-user --map-auto --mount --pid
// --fork` runs this same program again, which finds rootfsJobEnv, does what
// root does (mmdebstrap --mode=root, npm, the checks in a chroot, the setid
// strip, mkfs.erofs) and prints the manifest. Inside, the files of the tree
// belong to the subordinate ids of /etc/subuid (uid 0 is the user), so
// mkfs.erofs records them as root's, as a build by root does; the image and
// the cache directory are the user's. The host needs newuidmap and
// newgidmap (the uidmap package), an /etc/subuid and /etc/subgid entry for
// the user (apt's _apt and the packages' system users get ids from it), and
// unprivileged user namespaces (Debian allows them since 11). Measured: a
// build this way takes as long as one as root.

// userNSArgs make the build's namespace: the user is root in it, the
// subordinate ids the rest; its own mounts, and its own PIDs so that it can
// mount /proc.
var userNSArgs = []string{"--user", "--map-root-user", "--map-auto", "--mount", "--pid", "--fork"}

// rootfsJobEnv carries a rootfsJob to the re-executed program.
const rootfsJobEnv = "CAPSEM_ROOTFS_JOB"

// rootfsJob is what the re-executed program builds.
type rootfsJob struct {
	Recipe RootfsRecipe `json:"recipe"`
	Dir    string       `json:"dir"`
	Step   int          `json:"step"` // the progress steps done before it
	Total  int          `json:"total"`
}

// RunRootfsJob builds a root filesystem and exits when this process was
// started for that by a build in a user namespace; it returns at once
// otherwise. A program that builds guest images (capsem) calls it first in
// main.
func RunRootfsJob() {
	v := os.Getenv(rootfsJobEnv)
	if v == "" {
		return
	}
	os.Unsetenv(rootfsJobEnv)
	var job rootfsJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		fmt.Fprintln(os.Stderr, "root filesystem job:", err)
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "root filesystem job: not root in its user namespace")
		os.Exit(2)
	}
	now := time.Now()
	p := &progress{w: os.Stderr, total: job.Total, n: job.Step, start: now, stepStart: now}
	// An interrupt (^C reaches the whole process group) ends the build
	// through its context, so the tree is removed here, where the files
	// of the subordinate ids can be.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	m, err := buildRootfs(ctx, job.Recipe, job.Dir, p)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(m); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// buildRootfsInUserNS is buildRootfs for a normal user.
func buildRootfsInUserNS(ctx context.Context, r RootfsRecipe, dir string, p *progress) (*rootfsManifest, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}
	job := rootfsJob{Recipe: r, Dir: dir}
	if p != nil {
		job.Step, job.Total = p.n, p.total
	}
	b, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "unshare", slices.Concat(userNSArgs, []string{"--kill-child", "--", exe})...)
	cmd.Env = append(os.Environ(), rootfsJobEnv+"="+string(b), "PATH="+pathWithSbin())
	// unshare --fork ignores SIGTERM (util-linux 2.38, measured): the build
	// ends with it at WaitDelay (--kill-child), and the tree it leaves is
	// removed by the cache's removeAll.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	tail := newTail(40)
	cmd.Stdout = &out
	cmd.Stderr = tail
	if p != nil && p.w != nil {
		cmd.Stderr = io.MultiWriter(p.w, tail)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("root filesystem: %w", ctx.Err())
		}
		return nil, fmt.Errorf("root filesystem, built in a user namespace (unshare --map-auto): %v; its last lines:\n%s", err, tail)
	}
	var m rootfsManifest
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return nil, fmt.Errorf("root filesystem: the build in a user namespace gave no manifest (%v): %q", err, out.String())
	}
	if p != nil {
		p.n += 2 // the two steps the build printed
	}
	return &m, nil
}

// userNSPreflight says what a normal user lacks to build in a user
// namespace, with the fix.
func userNSPreflight() error {
	var problems []string
	for _, t := range []string{"newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(t); err != nil {
			problems = append(problems, t+" is missing: apt-get install uidmap (or go tool task deps)")
			break
		}
	}
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("building the root filesystem as a normal user: %w", err)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if !hasSubIDs(f, u.Username, u.Uid) {
			problems = append(problems, fmt.Sprintf("%s has no range for %s: sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s", f, u.Username, u.Username))
			break
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		problems = append(problems, "unprivileged user namespaces are off: sudo sysctl kernel.unprivileged_userns_clone=1")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		problems = append(problems, "user namespaces are off: sudo sysctl user.max_user_namespaces=15000")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		problems = append(problems, "AppArmor takes root's powers away in a normal user's namespace (Ubuntu 23.10 and later): sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0")
	}
	if out, err := exec.Command("unshare", "--help").CombinedOutput(); err == nil && !bytes.Contains(out, []byte("--map-auto")) {
		problems = append(problems, "this unshare has no --map-auto: util-linux 2.38 or later (Debian 12) is needed")
	}
	if len(problems) == 0 {
		// What the files say can still be refused (a container's seccomp
		// filter, a kernel without user namespaces): make the namespace
		// the build runs in, with its /proc, once (a few milliseconds).
		if out, err := exec.Command("unshare", slices.Concat(userNSArgs, []string{"--mount-proc", "true"})...).CombinedOutput(); err != nil {
			problems = append(problems, fmt.Sprintf("`unshare %s --mount-proc true` fails here (%v: %s): allow user namespaces for this user (in a container: run it with --privileged or a seccomp profile that allows unshare and mount)",
				strings.Join(userNSArgs, " "), err, bytes.TrimSpace(out)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("building the root filesystem as a normal user needs a user namespace (or run the build as root): %s", strings.Join(problems, "; "))
	}
	return nil
}

// hasSubIDs says whether the subordinate-id file f has a range for the
// user (by name or uid).
func hasSubIDs(f, name, uid string) bool {
	b, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		fields := strings.Split(l, ":")
		if len(fields) == 3 && (fields[0] == name || fields[0] == uid) && fields[2] != "0" {
			return true
		}
	}
	return false
}
