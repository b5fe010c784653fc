package sandbox

import "github.com/capsem/capsem/mitm/ca"

// LoadAuthority loads the interception CA of dir ("": ca.DefaultDir()),
// making it on first use: the Config.Authority of capsem run's guests and
// of a sandbox's supervisor alike.
func LoadAuthority(dir string) (*ca.Authority, error) {
	if dir == "" {
		var err error
		if dir, err = ca.DefaultDir(); err != nil {
			return nil, err
		}
	}
	return ca.LoadOrCreate(dir)
}
