// Command trainyard runs distributed PyTorch training. See `trainyard --help`.
package main

import (
	"context"
	"os"

	// Mozilla's root certificates, for when the system has none: the trainyard image is
	// the binary alone, and its init container clones code over https.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/trainyard/trainyard/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Stdio()))
}
