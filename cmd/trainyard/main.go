// Command trainyard runs distributed PyTorch training. See `trainyard --help`.
package main

import (
	"context"
	"os"

	"github.com/trainyard/trainyard/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Stdio()))
}
