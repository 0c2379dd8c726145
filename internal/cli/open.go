package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

const openLong = `Open the job server's dashboard in a browser, signed in, with a one-time sign-in link.

The link's code works once, within 2 minutes, and only at the server that made it: this
command asks for it only after the server has proved that it holds the token for the
address this command reached (the token itself is never sent), and the server answers
the code sealed to this command's session, which opens it; so a program that stands in
for the server on its port, or passes its bytes on from another port, learns nothing.
A right code always signs in, whatever wrong ones were tried before. The dashboard
never asks for the token on plain HTTP.

The link opens in $BROWSER, else xdg-open, when there is a display ($DISPLAY or
$WAYLAND_DISPLAY); otherwise, or with --print, it is printed: open it in the browser
that reaches the server (through an ssh tunnel, say: ssh -L 8265:127.0.0.1:8265 gpu-box,
then 'trainyard open --print' on gpu-box).` + remoteHelp

func newOpenCommand(g *globals) *cobra.Command {
	var (
		remote    remoteOptions
		printOnly bool
	)
	cmd := &cobra.Command{
		Use:   "open",
		Short: "Open the server's dashboard, signed in with a one-time link",
		Long:  openLong,
		Example: `  trainyard open
  trainyard open --print
  TRAINYARD_TOKEN=... trainyard open --print --address https://gpu-box:8265`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := remote.client()
			if err != nil {
				return err
			}
			link, expires, err := c.SignInLink(cmd.Context())
			if err != nil {
				return failed(err)
			}
			if !printOnly && openBrowser(cmd.Context(), link) == nil {
				_, err = fmt.Fprintf(g.io.Out, "Opened the dashboard of %s in the browser (the link works once, until %s).\n",
					c.Address(), expires.Local().Format(time.TimeOnly))
				return err
			}
			_, err = fmt.Fprintf(g.io.Out, "%s\n  open it in your browser: it signs in once, until %s\n", link, expires.Local().Format(time.TimeOnly))
			return err
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the link instead of opening a browser")
	remote.bind(cmd.Flags())
	return cmd
}

// openBrowser opens link in $BROWSER, else xdg-open, when there is a display. The link is
// not put on the browser's command line, which other users may read (ps): the browser
// gets a private file (0600, in a 0700 folder) that sends it on to the link, removed once
// the browser has had time to read it.
func openBrowser(ctx context.Context, link string) error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display")
	}
	browser := os.Getenv("BROWSER")
	if browser == "" {
		browser = "xdg-open"
	}
	path, err := exec.LookPath(browser)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "trainyard-open-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	page := filepath.Join(dir, "signin.html")
	target, _ := json.Marshal(link) // a JavaScript string
	html := "<!doctype html><meta charset=utf-8><title>Trainyard</title><script>location.replace(" + string(target) + ")</script>\n"
	if err := os.WriteFile(page, []byte(html), 0o600); err != nil {
		return err
	}
	if err := exec.CommandContext(ctx, path, "file://"+page).Start(); err != nil {
		return err
	}
	select { // the browser reads the file; then it goes
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	return nil
}
