package main

import (
	"crypto/ed25519"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/mitm/ca"
)

func caDirFlag() cli.Flag {
	dir, err := ca.DefaultDir()
	if err != nil {
		dir = ""
	}
	return &cli.StringFlag{Name: "ca-dir", Value: dir, Usage: "the capsem CA's `DIR`"}
}

func caCommand() *cli.Command {
	return &cli.Command{
		Name:  "ca",
		Usage: "the per-installation CA whose leaves the guest sees when capsem intercepts TLS",
		Description: "The CA is generated on first use (ECDSA P-256); its key stays in the CA directory, mode 0600,\n" +
			"and never leaves this machine. Guests trust its certificate; give it to any client that should\n" +
			"trust capsem's interception (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE).",
		OnUsageError: onUsageError,
		Subcommands: []*cli.Command{
			{
				Name:         "path",
				Usage:        "print the path of the CA certificate (creating the CA if there is none)",
				Flags:        []cli.Flag{caDirFlag()},
				OnUsageError: onUsageError,
				Action: func(c *cli.Context) error {
					a, err := loadCA(c)
					if err != nil {
						return err
					}
					fmt.Fprintln(c.App.Writer, a.CertPath())
					return nil
				},
			},
			{
				Name:         "export",
				Usage:        "print the CA certificate (PEM), or write it to --out",
				Flags:        []cli.Flag{caDirFlag(), &cli.StringFlag{Name: "out", Usage: "write to `FILE` instead of stdout"}},
				OnUsageError: onUsageError,
				Action: func(c *cli.Context) error {
					a, err := loadCA(c)
					if err != nil {
						return err
					}
					if out := c.String("out"); out != "" {
						return os.WriteFile(out, a.CertPEM(), 0o644)
					}
					_, err = c.App.Writer.Write(a.CertPEM())
					return err
				},
			},
			{
				Name:  "seal-key",
				Usage: "print the public key that seals this installation's session records (PEM), or write it to --out",
				Description: "Each session's hash chain is sealed with an ed25519 key kept beside the CA (seal-key.pem, mode\n" +
					"0600; made on first use; `ca rotate` keeps it). Give its public half to whoever checks records made\n" +
					"here: `capsem inspect --key FILE` trusts it.",
				Flags:        []cli.Flag{caDirFlag(), &cli.StringFlag{Name: "out", Usage: "write to `FILE` instead of stdout"}},
				OnUsageError: onUsageError,
				Action: func(c *cli.Context) error {
					dir, err := caDir(c)
					if err != nil {
						return err
					}
					key, err := ca.LoadOrCreateSealKey(dir)
					if err != nil {
						return err
					}
					pub := ca.EncodeSealPub(key.Public().(ed25519.PublicKey))
					if out := c.String("out"); out != "" {
						return os.WriteFile(out, pub, 0o644)
					}
					_, err = c.App.Writer.Write(pub)
					return err
				},
			},
			{
				Name:         "rotate",
				Usage:        "replace the CA with a new one; guests started afterwards trust only the new one",
				Flags:        []cli.Flag{caDirFlag()},
				OnUsageError: onUsageError,
				Action: func(c *cli.Context) error {
					dir, err := caDir(c)
					if err != nil {
						return err
					}
					a, err := ca.Rotate(dir)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "new capsem CA %s\n  certificate %s\n  sha256 %s\n", a.Certificate().Subject.CommonName, a.CertPath(), a.Fingerprint())
					fmt.Fprintln(c.App.Writer, "restart capsem-net and running guests: they still trust the old CA until then")
					return nil
				},
			},
		},
	}
}

func caDir(c *cli.Context) (string, error) {
	dir := c.String("ca-dir")
	if dir == "" {
		return ca.DefaultDir()
	}
	return dir, nil
}

func loadCA(c *cli.Context) (*ca.Authority, error) {
	dir, err := caDir(c)
	if err != nil {
		return nil, err
	}
	return ca.LoadOrCreate(dir)
}
