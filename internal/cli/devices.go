package cli

import (
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
			if err := checkFormat(output, "json"); err != nil {
				return err
			}
			inv, err := discoverGPUs(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printData(g.io.Out, output, devicesJSON(inv))
			}
			return printDevices(g, inv)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: a table)")
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

// devicesOutput is what devices -o json prints.
type devicesOutput struct {
	GPUs []gpuOutput `json:"gpus"`
	// DriverVersion is the NVIDIA driver's version; empty when unknown.
	DriverVersion string `json:"driverVersion"`
	// Source says where the GPUs came from, or why there are none.
	Source string `json:"source"`
}

// gpuOutput is one GPU in devices -o json.
type gpuOutput struct {
	Index         int    `json:"index"`
	UUID          string `json:"uuid"`
	Name          string `json:"name"`
	MemoryMiB     int64  `json:"memoryMiB"`
	MemoryUsedMiB int64  `json:"memoryUsedMiB"`
	// UtilizationPercent is null when unknown.
	UtilizationPercent *int `json:"utilizationPercent"`
}

// devicesJSON converts an inventory to what devices -o json prints.
func devicesJSON(inv device.Inventory) devicesOutput {
	out := devicesOutput{GPUs: []gpuOutput{}, DriverVersion: inv.DriverVersion, Source: inv.Source}
	for _, d := range inv.GPUs {
		gpu := gpuOutput{Index: d.Index, UUID: d.UUID, Name: d.Name, MemoryMiB: d.MemoryMiB, MemoryUsedMiB: d.MemoryUsedMiB}
		if d.UtilizationPercent >= 0 {
			gpu.UtilizationPercent = &d.UtilizationPercent
		}
		out.GPUs = append(out.GPUs, gpu)
	}
	return out
}
