package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport/inspect"
)

// chainCheckName is the name of inspect's check of a session's hash chain
// and seal (store/chain.go).
const chainCheckName = "hash chain"

func inspectChainFlags() []cli.Flag {
	return []cli.Flag{
		caDirFlag(),
		&cli.StringSliceFlag{Name: "key", Usage: "trust the seal key in `FILE` (a seal.pub, or its 64 hex digits) besides this installation's (--ca-dir's seal.pub)"},
		&cli.BoolFlag{Name: "require-chain", Usage: "fail a session recorded without a hash chain (by a capsem before 0.1.0) instead of noting it"},
	}
}

// trustedSealKeys are the keys whose seal inspect accepts: this
// installation's, when it has one (inspect never makes one), and --key's.
func trustedSealKeys(c *cli.Context) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	if dir, err := caDir(c); err == nil {
		if b, err := os.ReadFile(filepath.Join(dir, ca.SealPubFile)); err == nil {
			pub, err := ca.ParseSealPub(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ca.SealPubFile), err)
			}
			keys = append(keys, pub)
		}
	}
	for _, f := range c.StringSlice("key") {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		pub, err := ca.ParseSealPub(b)
		if err != nil {
			return nil, fmt.Errorf("--key %s: %w", f, err)
		}
		keys = append(keys, pub)
	}
	return keys, nil
}

// chainCheck turns what a chain verification found into inspect's check:
// failed when the chain is broken, unsealed, or sealed by a key not
// trusted here; a session from before chains passes with a note unless
// --require-chain.
func chainCheck(c *cli.Context, st store.ChainStatus, scrubbed bool, verr error) (inspect.Check, error) {
	ch := inspect.Check{Name: chainCheckName}
	if verr != nil {
		if !errors.Is(verr, store.ErrChainBroken) {
			return ch, verr
		}
		ch.Detail = verr.Error()
		return ch, nil
	}
	if !st.Chained {
		ch.OK = !c.Bool("require-chain")
		ch.Detail = fmt.Sprintf("%d events recorded without a hash chain (by a capsem that did not keep one): not verifiable", st.Events)
		return ch, nil
	}
	if st.Key == nil {
		ch.Detail = fmt.Sprintf("%d events chained, but the record is not sealed: its signature was removed, or it was recorded without a seal key", st.Events)
		return ch, nil
	}
	trusted, err := trustedSealKeys(c)
	if err != nil {
		return ch, err
	}
	var fps []string
	for _, k := range trusted {
		if k.Equal(st.Key) {
			ch.OK = true
		}
		fps = append(fps, ca.SealFingerprint(k))
	}
	if !ch.OK {
		here := "none here (no seal.pub in --ca-dir)"
		if len(fps) > 0 {
			here = strings.Join(fps, ", ")
		}
		ch.Detail = fmt.Sprintf("sealed by key %s, which is not trusted: trusted are %s; if that key is yours, pass --key with its seal.pub (capsem ca seal-key)",
			ca.SealFingerprint(st.Key), here)
		return ch, nil
	}
	ch.Detail = fmt.Sprintf("%d events chained and sealed by key %s", st.Events, ca.SealFingerprint(st.Key))
	if st.Unsealed > 0 {
		ch.Detail += fmt.Sprintf("; the last %d follow the seal (the session is running, or its writer stopped without ending it)", st.Unsealed)
	}
	if scrubbed {
		ch.Detail += "; the rows were not checked against their records (a --scrub export leaves them out)"
	}
	return ch, nil
}
