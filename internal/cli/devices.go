package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/device"
)

func newDevicesCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the GPUs Trainyard finds on this machine",
		Long: `List the NVIDIA GPUs that Trainyard can give to workers, as NVML reports them
(through nvidia-smi). If CUDA_VISIBLE_DEVICES is set, only those GPUs are listed and used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return usageError(fmt.Errorf("--output %q: must be json or left out", output))
			}
			inv, err := discoverGPUs(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(g.io.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(inv)
			}
			return printDevices(g, inv)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}

func printDevices(g *globals, inv device.Inventory) error {
	if len(inv.GPUs) == 0 {
		_, err := fmt.Fprintf(g.io.Out, "No GPUs (%s).\n", inv.Source)
		return err
	}
	tw := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tNAME\tMEMORY\tUSED\tUTIL\tUUID")
	for _, d := range inv.GPUs {
		util := "-"
		if d.UtilizationPercent >= 0 {
			util = fmt.Sprintf("%d%%", d.UtilizationPercent)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d MiB\t%d MiB\t%s\t%s\n", d.Index, d.Name, d.MemoryMiB, d.MemoryUsedMiB, util, d.UUID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(g.io.Out, "%d GPU(s), driver %s, from %s\n", len(inv.GPUs), inv.DriverVersion, inv.Source)
	return err
}
