package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/units"
)

func newTopCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show what the server's machine (or a cluster) offers and what jobs hold: node, job",
		Long: `Show the resources of a trainyard server's machine (top node) or the GPUs each job
asks for and holds (top job), as Arena's top commands do; with --kube, those of a
Kubernetes cluster's nodes and TrainJobs.`,
		Example: `  trainyard top node
  trainyard top job
  trainyard top node --kube
  trainyard top job --kube -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTopNodeCommand(g), newTopJobCommand(g))
	return cmd
}

func newTopNodeCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		output string
		kube   kubeOptions
	)
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show the server's GPUs, CPU and memory: total, allocated to jobs, free",
		Long: `Show what the server's machine offers to jobs (its GPUs, CPU cores and memory), how
much of it running jobs hold and what is free; then each GPU with the job that holds
it, its utilisation and its memory in use, when the server can measure them.` + remoteHelp + kubeHelp + `

On a cluster: each node's status, its allocatable nvidia.com/gpu, CPU and memory, what
the pods on it that have not ended request (as the scheduler counts it), what is free,
and the number of those pods; -o wide adds the GPU model (nvidia.com/gpu.product).`,
		Example: `  trainyard top node
  trainyard top node -o json
  trainyard top node --kube -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeTopNode(cmd.Context(), g, &kube, output)
			}
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			node, err := c.Node(cmd.Context())
			if err != nil {
				return failed(err)
			}
			if output != "" {
				return printData(g.io.Out, output, node)
			}
			running, err := c.List(cmd.Context(), client.StatusRunning)
			if err != nil {
				return failed(err)
			}
			return printNodeTop(newView(g, output), node, running)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp("json", "yaml")+"; wide with --kube")
	kube.bind(cmd.Flags())
	return cmd
}

// printNodeTop writes the machine's resources, then one row per GPU.
func printNodeTop(v view, n client.Node, running []client.Job) error {
	tw := v.table()
	fmt.Fprintln(tw, "RESOURCE\tTOTAL\tALLOCATED\tFREE")
	fmt.Fprintf(tw, "GPU\t%d\t%d\t%d\n", n.GPUs.Total, n.GPUs.Allocated, n.GPUs.Free)
	fmt.Fprintf(tw, "CPU\t%s\t%s\t%s\n", units.Cores(n.MilliCPU.Total), units.Cores(n.MilliCPU.Allocated), units.Cores(n.MilliCPU.Free))
	fmt.Fprintf(tw, "MEMORY\t%s\t%s\t%s\n", units.BytesIEC(n.MemoryBytes.Total), units.BytesIEC(n.MemoryBytes.Allocated), units.BytesIEC(n.MemoryBytes.Free))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(n.GPUs.Indices) == 0 {
		return nil
	}
	holders := map[int]string{}
	for _, j := range running {
		for _, w := range j.GPUs {
			for _, idx := range w {
				holders[idx] = j.ID
			}
		}
	}
	use := map[int]client.GPUUtilization{}
	for _, u := range n.GPUs.Utilization {
		use[u.Index] = u
	}
	fmt.Fprintln(v.out)
	tw = v.table()
	fmt.Fprintln(tw, "GPU\tJOB\tUTIL\tMEMORY USED\tMEMORY TOTAL")
	for _, idx := range n.GPUs.Indices {
		util, used, total := "-", "-", "-"
		if u, ok := use[idx]; ok {
			util = strconv.FormatFloat(u.Percent, 'f', 0, 64) + "%"
			used, total = units.BytesIEC(u.MemoryUsedBytes), units.BytesIEC(u.MemoryTotalBytes)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", idx, orDash(holders[idx]), util, used, total)
	}
	return tw.Flush()
}

func newTopJobCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		output string
		kube   kubeOptions
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "job [NAME]",
		Short: "Show the GPUs each pending or running job asks for and holds",
		Long: `Show, for each job that is pending or running, its workers, the GPUs it asks for in
all (workers x GPUs per worker), the GPUs it holds and their indices, and the totals
against the machine's GPUs. With a NAME (or ID), that job's ranks of its last attempt:
each rank's worker, PID, GPUs, and their utilization and memory now (from nvidia-smi),
as Arena's top job shows them.` + remoteHelp + kubeHelp + `

On a cluster, as Arena's top job: each TrainJob of the namespace (-A: of all) with its
phase, workers ready, GPU(Requested) (workers x GPUs per worker), GPU(Allocated) (what
its pods that are on a node and have not ended hold), the node of worker 0's pod, its
last iteration and metrics; then the totals, "Total Allocated/Requested GPUs of Training
Jobs: 3/4", whose requests are those of the jobs that have not ended and are not
suspended. With a NAME, that job's worker pods of its current attempt with their node,
state, the GPUs, CPU and memory they request, and their GPUs' utilization and memory now,
which each worker samples from nvidia-smi (read through the API server's pod proxy:
the user needs the right to get pods/proxy).`,
		Example: `  trainyard top job
  trainyard top job fashion-mnist
  trainyard top job -o json
  trainyard top job --kube -A
  trainyard top job --kube mnist`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeTopJob(cmd.Context(), g, &kube, args, all, output)
			}
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			if len(args) > 0 {
				return topRanks(cmd.Context(), newView(g, output), c, args[0], output)
			}
			usage, node, err := jobUsages(cmd.Context(), c)
			if err != nil {
				return failed(err)
			}
			if output != "" {
				return printData(g.io.Out, output, usage)
			}
			return printJobTop(newView(g, output), usage, node)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp("json", "yaml")+"; wide with --kube")
	kube.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "with --kube: the TrainJobs of every namespace")
	kube.only("all-namespaces")
	return cmd
}

// jobUsage is what one job asks for and holds, as top job prints it.
type jobUsage struct {
	ID            string           `json:"id"`
	Name          string           `json:"name,omitempty"`
	Status        client.JobStatus `json:"status"`
	Workers       int              `json:"workers"`
	GPUsRequested int              `json:"gpusRequested"`
	GPUsAllocated int              `json:"gpusAllocated"`
	GPUs          [][]int          `json:"gpus,omitempty"`
	Job           client.Job       `json:"-"`
}

// jobUsages reads the pending and running jobs, each with its spec, and the machine.
func jobUsages(ctx context.Context, c *client.Client) ([]jobUsage, client.Node, error) {
	node, err := c.Node(ctx)
	if err != nil {
		return nil, node, err
	}
	jobs, err := c.List(ctx, client.StatusPending, client.StatusRunning)
	if err != nil {
		return nil, node, err
	}
	usage := make([]jobUsage, 0, len(jobs))
	for _, j := range jobs {
		d, err := c.Get(ctx, j.ID)
		if client.IsNotFound(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, node, err
		}
		usage = append(usage, newJobUsage(d))
	}
	return usage, node, nil
}

// newJobUsage counts what a job asks for and holds.
func newJobUsage(d client.JobDetail) jobUsage {
	u := jobUsage{ID: d.Job.ID, Name: d.Job.Name, Status: d.Job.Status, GPUs: d.Job.GPUs,
		GPUsAllocated: gpuCount(d.Job.GPUs), Job: d.Job}
	if d.Spec != nil {
		u.Workers = d.Spec.Spec.WorkerCount()
		u.GPUsRequested = u.Workers * int(d.Spec.Spec.Resources.GPU)
	}
	return u
}

// printJobTop writes one row per job, then the totals.
func printJobTop(v view, usage []jobUsage, n client.Node) error {
	requested, allocated := 0, 0
	tw := v.table()
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tWORKERS\tGPUS REQUESTED\tGPUS ALLOCATED\tGPU IDS\tDURATION")
	for _, u := range usage {
		requested += u.GPUsRequested
		allocated += u.GPUsAllocated
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", u.ID, orDash(cell(u.Name)), u.Status, u.Workers,
			u.GPUsRequested, u.GPUsAllocated, orDash(gpuIDs(u.GPUs)), v.runTime(u.Job.StartedAt, u.Job.EndedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(v.out, "\nGPUs: %d requested, %d allocated, of %d on the machine (%d free).\n",
		requested, allocated, n.GPUs.Total, n.GPUs.Free)
	return err
}

// rankUse is one rank of a job and what its GPUs are doing, as top job NAME prints it.
type rankUse struct {
	Rank   int            `json:"rank"`
	Worker int            `json:"worker"`
	PID    int            `json:"pid,omitempty"`
	GPUs   []int          `json:"gpus"`
	Use    *client.GPUUse `json:"use,omitempty"`
}

// topRanks writes the ranks of a job's last attempt with their GPUs' use.
func topRanks(ctx context.Context, v view, c *client.Client, ref, output string) error {
	d, err := c.Get(ctx, ref)
	if err != nil {
		return failed(err)
	}
	node, err := c.Node(ctx)
	if err != nil {
		return failed(err)
	}
	ranks := []rankUse{}
	if d.Run != nil && len(d.Run.Attempts) > 0 {
		for _, r := range d.Run.Attempts[len(d.Run.Attempts)-1].Ranks {
			ru := rankUse{Rank: r.Rank, Worker: r.Worker, PID: r.PID, GPUs: client.GPUList(r.GPUs)}
			if u, ok := client.UseOf(ru.GPUs, node.GPUs.Utilization); ok {
				ru.Use = &u
			}
			ranks = append(ranks, ru)
		}
	}
	if output != "" {
		return printData(v.out, output, ranks)
	}
	if len(ranks) == 0 {
		_, err := fmt.Fprintf(v.out, "Job %s has no attempt yet (%s).\n", d.Job.ID, d.Job.Status)
		return err
	}
	tw := v.table()
	fmt.Fprintln(tw, "RANK\tWORKER\tPID\tGPUS\tGPU UTIL\tGPU MEMORY")
	for _, r := range ranks {
		util, mem := "-", "-"
		if r.Use != nil {
			util = fmt.Sprintf("%.0f%%", r.Use.Percent)
			mem = fmt.Sprintf("%d/%d MiB", r.Use.UsedBytes>>20, r.Use.TotalBytes>>20)
		}
		ids := make([]string, len(r.GPUs))
		for i, g := range r.GPUs {
			ids[i] = strconv.Itoa(g)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\n", r.Rank, r.Worker, r.PID, orDash(strings.Join(ids, ",")), util, mem)
	}
	return tw.Flush()
}
