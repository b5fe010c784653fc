package supervisor

import (
	"fmt"
	"slices"

	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// Published ports: the supervisor holds their listeners (ports.Publisher),
// the sandbox carries their connections into the guest, and the settings
// keep the specs as published, so that the next start publishes them
// again. The ports in force are in run.json too, for capsem ls.

// publishSettings publishes the settings' ports before the guest boots,
// so that a host port another program or sandbox holds fails the start
// at once.
func publishSettings(pub *ports.Publisher, s home.Settings) error {
	for _, p := range s.Ports {
		sp, err := ports.ParseSpec(p)
		if err != nil {
			return fmt.Errorf("sandbox %s: its settings publish %w", s.Name, err)
		}
		if _, err := pub.Add(sp); err != nil {
			return fmt.Errorf("sandbox %s: %w (capsem port %s rm %s drops it from its settings)", s.Name, err, s.Name, p)
		}
	}
	return nil
}

// portsInForce is the publisher's ports as the API shows them.
func portsInForce(pub *ports.Publisher) []api.Port {
	var out []api.Port
	for _, p := range pub.List() {
		out = append(out, api.PortOf(p.Spec, p.Asked))
	}
	return out
}

// Ports lists the published ports in force.
func (s *supervisor) Ports() []api.Port { return portsInForce(s.pub) }

// Publish publishes spec and keeps it in the settings.
func (s *supervisor) Publish(spec string) (api.Port, error) {
	select {
	case <-s.stopping:
		return api.Port{}, api.ErrStopping
	default:
	}
	sp, err := ports.ParseSpec(spec)
	if err != nil {
		return api.Port{}, err
	}
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	got, err := s.pub.Add(sp)
	if err != nil {
		return api.Port{}, err
	}
	s.settings.Ports = append(s.settings.Ports, sp.String())
	if err := s.portsChanged(); err != nil {
		_, _ = s.pub.Remove(got)
		s.settings.Ports = s.settings.Ports[:len(s.settings.Ports)-1]
		return api.Port{}, err
	}
	return api.PortOf(got, sp), nil
}

// Unpublish unpublishes spec's host port and drops it from the settings.
func (s *supervisor) Unpublish(spec string) (api.Port, error) {
	sp, err := ports.ParseSpec(spec)
	if err != nil {
		return api.Port{}, err
	}
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	p, err := s.pub.Remove(sp)
	if err != nil {
		return api.Port{}, err
	}
	// One entry goes: the same spec published twice (two free ports) is
	// two entries.
	if i := slices.IndexFunc(s.settings.Ports, func(q string) bool {
		qs, err := ports.ParseSpec(q)
		return err == nil && qs == p.Asked
	}); i >= 0 {
		s.settings.Ports = slices.Delete(s.settings.Ports, i, i+1)
	}
	if err := s.portsChanged(); err != nil {
		return api.Port{}, fmt.Errorf("unpublished, but the settings still list it (the next start publishes it again): %w", err)
	}
	return api.PortOf(p.Spec, p.Asked), nil
}

// portsChanged writes the settings and run.json after a change of the
// ports; with portsMu held.
func (s *supervisor) portsChanged() error {
	if err := s.dir.WriteSettings(s.settings); err != nil {
		return fmt.Errorf("settings not written: %w", err)
	}
	s.mu.Lock()
	s.launch.Ports = portsInForce(s.pub)
	s.mu.Unlock()
	if err := s.writeLaunch(); err != nil {
		s.log.Warn("run.json not written: capsem ls shows the ports as they were", "err", err)
	}
	return nil
}
