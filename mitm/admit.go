package mitm

// admitter is what a recorder that can refuse says: store.Writer's Admit
// returns an error when a new event cannot be recorded now (the store
// failed to write, the session ended). netstack.Recorder is gaining the
// method; until every recorder has it, the proxy asks only those that do.
type admitter interface {
	Admit() error
}

// admit reports whether the request about to be forwarded can be
// recorded. The MITM fails closed: nothing reaches an upstream that the
// record would miss.
func (p *Proxy) admit() error {
	if a, ok := p.cfg.Recorder.(admitter); ok {
		return a.Admit()
	}
	return nil
}
