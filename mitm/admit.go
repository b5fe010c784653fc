package mitm

// admit reports whether the request about to be forwarded can be
// recorded: the recorder's Admit (store.Writer's returns an error when the
// store failed to write or the session ended). The MITM fails closed:
// nothing reaches an upstream that the record would miss.
func (p *Proxy) admit() error {
	return p.cfg.Recorder.Admit()
}
