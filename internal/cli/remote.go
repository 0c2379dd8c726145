package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/client"
)

// This file holds what every command that talks to a trainyard server shares: the
// flags that find the server and its token, the -o flag, and the formatting of tables.

// remoteOptions are the flags that find the server and its token.
type remoteOptions struct {
	address   string
	tokenFile string
	caCert    string
}

// remoteHelp ends the Long help of every command that talks to a server.
const remoteHelp = `

The server is --address, else $TRAINYARD_ADDRESS, else http://127.0.0.1:8265. Its token
is read from --token-file, else taken from $TRAINYARD_TOKEN, else read from the file
the server writes it to ($TRAINYARD_TOKEN_FILE, else ~/.config/trainyard/token), so on
the server's machine the token is found without being given. A token found that way is
sent only to the addresses of the servers that use that file (its .servers file beside
it); give --token-file or $TRAINYARD_TOKEN to send a token elsewhere. Whatever the
token, the server must prove it holds it for the address this command reached: through
a port forward, keep the address and port (ssh -L 8265:127.0.0.1:8265 gpu-box).`

// bind registers the flags on fs.
func (o *remoteOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.address, "address", "", "the server's address (default $"+client.EnvAddress+", else "+client.DefaultAddress+")")
	fs.StringVar(&o.tokenFile, "token-file", "", "file that holds the server's token (default $"+client.EnvToken+
		", else the server's token file)")
	fs.StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA that signed an https server's certificate")
}

// client returns a client of the server the flags and environment name. Its errors are
// usage errors: nothing was asked of the server.
func (o *remoteOptions) client() (*client.Client, error) {
	var opts []client.Option
	if o.caCert != "" {
		cfg, err := caConfig(o.caCert)
		if err != nil {
			return nil, usageError(err)
		}
		opts = append(opts, client.WithTLSConfig(cfg))
	}
	c, err := client.Connect(o.address, o.tokenFile, opts...)
	if err != nil {
		return nil, usageError(err)
	}
	return c, nil
}

// caConfig returns a TLS configuration that trusts the CA certificates in a PEM file.
func caConfig(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// failed marks an error of the server or of reaching it: trainyard prints it and exits 1.
func failed(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: ExitFailed, err: err}
}

// checkOutput refuses an -o value that is not one of allowed (or empty, the table).
func checkOutput(output string, allowed ...string) error {
	if output == "" || slices.Contains(allowed, output) {
		return nil
	}
	return usageError(fmt.Errorf("--output %q: must be %s, or left out for a table", output, strings.Join(allowed, ", ")))
}

// outputHelp is the help of an -o flag that takes the given formats.
func outputHelp(formats ...string) string {
	return "output format: " + strings.Join(formats, ", ") + " (default: a table)"
}

// printData writes v as JSON (indented) or YAML.
func printData(w io.Writer, output string, v any) error {
	if output == "yaml" {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("write YAML: %w", err)
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// view is how a command prints a table: where to, the time ages are measured from, the
// time zone of clock times, and whether the table is wide (-o wide).
type view struct {
	out  io.Writer
	now  time.Time
	loc  *time.Location
	wide bool
}

// newView returns the view of a command's output, now, in local time.
func newView(g *globals, output string) view {
	return view{out: g.io.Out, now: time.Now(), loc: time.Local, wide: output == "wide"}
}

// table returns a tabwriter for the view's output, with kubectl's spacing.
func (v view) table() *tabwriter.Writer {
	return tabwriter.NewWriter(v.out, 0, 8, 2, ' ', 0)
}

// clock writes a time as a date and time of day in the view's time zone.
func (v view) clock(t time.Time) string {
	return t.In(v.loc).Format("2006-01-02 15:04:05")
}

// age writes how long ago t was.
func (v view) age(t time.Time) string {
	return humanDuration(v.now.Sub(t)) + " ago"
}

// runTime writes how long a job ran: from start to end, or to now while it runs; "-"
// when it never started.
func (v view) runTime(started, ended *time.Time) string {
	switch {
	case started == nil:
		return "-"
	case ended == nil:
		return humanDuration(v.now.Sub(*started))
	}
	return humanDuration(ended.Sub(*started))
}

// humanDuration writes a duration in at most two units, as kubectl writes ages: 45s,
// 3m20s, 25m, 5h12m, 30h, 3d4h, 12d; a second unit of zero is left out (3h, not 3h0m).
func humanDuration(d time.Duration) string {
	s := int64(max(0, d.Round(time.Second)/time.Second))
	m, h, days := s/60, s/3600, s/86400
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		return twoUnits(m, "m", s%60, "s")
	case h < 3:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		return twoUnits(h, "h", m%60, "m")
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case days < 8:
		return twoUnits(days, "d", h%24, "h")
	}
	return fmt.Sprintf("%dd", days)
}

// twoUnits writes a duration as a count of a unit and, unless zero, of a smaller one.
func twoUnits(n int64, unit string, rest int64, restUnit string) string {
	if rest == 0 {
		return fmt.Sprintf("%d%s", n, unit)
	}
	return fmt.Sprintf("%d%s%d%s", n, unit, rest, restUnit)
}

// orDash returns s, or "-" when it is empty, so that a table cell is never blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shorten cuts s to n characters, marking the cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// cell makes s fit in a table cell: one line, tabs as spaces.
func cell(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// gpuIDs writes each worker's GPU indices, workers apart: "0,1 2,3".
func gpuIDs(gpus [][]int) string {
	parts := make([]string, 0, len(gpus))
	for _, w := range gpus {
		ids := make([]string, len(w))
		for i, g := range w {
			ids[i] = fmt.Sprint(g)
		}
		parts = append(parts, strings.Join(ids, ","))
	}
	return strings.TrimSpace(strings.Join(parts, " "))
}

// gpuCount returns how many GPUs a job holds in all.
func gpuCount(gpus [][]int) int {
	n := 0
	for _, w := range gpus {
		n += len(w)
	}
	return n
}
