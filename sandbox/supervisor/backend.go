package supervisor

import (
	"context"
	"io"
	"strings"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/store"
)

// The api.Backend of a running sandbox: what its API's handlers call.

func (s *supervisor) writeLaunch() error {
	s.mu.Lock()
	l := s.launch
	s.mu.Unlock()
	return s.dir.WriteLaunch(l)
}

func (s *supervisor) Status() api.Status {
	st, err := s.dir.Status(nil) // the policy in force is set below
	if err != nil {
		st = api.Status{Name: s.dir.Name}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.State, st.PID, st.Started, st.SessionID, st.PolicySHA256 = api.StateRunning, s.launch.PID, s.launch.Started, s.launch.SessionID, s.sb.Policy().SHA256
	return st
}

// Exec runs a command with the sandbox's environment under the request's
// (which wins, key by key).
func (s *supervisor) Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error) {
	select {
	case <-s.stopping:
		return nil, api.ErrStopping
	default:
	}
	senv, _ := sandbox.SecretEnv(s.sb.Policy(), nil)
	ex.Env = mergeEnv(append(senv, s.settings.Env...), ex.Env)
	return s.sb.Exec(ctx, ex)
}

// mergeEnv is base with over's variables added, over's value winning
// where both set a key.
func mergeEnv(base, over []string) []string {
	if len(base) == 0 {
		return over
	}
	set := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var out []string
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

func (s *supervisor) ReloadPolicy() (api.Reload, error) {
	// The guest holds its placeholders: they are kept.
	p, err := sandbox.LoadBoundPolicy(s.settings.Policy, s.settings.Secrets, s.sb.Policy().Placeholders())
	if err != nil {
		return api.Reload{}, err
	}
	if err := s.sb.SetPolicy(p); err != nil {
		return api.Reload{}, err
	}
	p = s.sb.Policy()
	s.mu.Lock()
	s.launch.PolicySHA256 = p.SHA256
	s.mu.Unlock()
	_ = s.writeLaunch()
	s.log.Info("policy reloaded", "sha256", p.SHA256)
	return api.Reload{Policy: sandbox.PolicyName(s.settings.Policy), SHA256: p.SHA256}, nil
}

func (s *supervisor) Stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

func (s *supervisor) Events(after uint64, fn func(store.Event) error) error {
	// Events appended but still in the writer's group-commit batch are not
	// readable yet: a client that ran a command and then asked for the
	// events would miss its exec event. Sync makes everything appended so
	// far readable first.
	if err := s.rs.W.Sync(); err != nil {
		s.log.Warn("events: the store could not sync; the newest events may be missing", "err", err)
	}
	return s.rs.St.EventsAfter(s.rs.ID(), after, fn)
}

func (s *supervisor) Done() <-chan struct{} { return s.stopping }

// StoreCopy checkpoints the session's store into the sandbox's
// store-copies directory, which the reader removes (and the next start
// clears).
func (s *supervisor) StoreCopy() (api.StoreCopy, error) {
	return s.rs.StoreCopy(s.dir.StoreCopiesDir())
}

func (s *supervisor) PutFile(ctx context.Context, path, mode string, size int64, body io.Reader) (int64, error) {
	n, err := s.sb.PutFile(ctx, path, mode, size, body)
	if err != nil {
		s.log.Warn("file put failed", "path", path, "bytes", n, "err", err)
	}
	return n, err
}

func (s *supervisor) GetFile(ctx context.Context, path string, open func(int64) (io.Writer, error)) (int64, error) {
	n, err := s.sb.GetFile(ctx, path, open)
	if err != nil {
		// Once the answer has begun the client sees only a short body:
		// the why is here.
		s.log.Warn("file get failed", "path", path, "bytes", n, "err", err)
	}
	return n, err
}

// Asks is the broker of the guest's questions.
func (s *supervisor) Asks() *ask.Broker { return s.sb.Asks() }
