package cli

import (
	"context"

	"github.com/trainyard/trainyard/internal/kubecli"
)

// kubeTopNode prints each node's GPUs, CPU and memory: allocatable, requested, free.
func kubeTopNode(ctx context.Context, g *globals, k *kubeOptions, output string) error {
	if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
		return err
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	nodes, err := c.NodeUsage(ctx)
	if err != nil {
		return kubeError(err)
	}
	if output == "json" || output == "yaml" {
		return printData(g.io.Out, output, nonNil(nodes))
	}
	return kubecli.PrintNodeUsage(kubeView(g, output), nodes)
}

// kubeTopJob prints the GPUs each TrainJob asks for and holds, or with a name, each
// worker pod of that job.
func kubeTopJob(ctx context.Context, g *globals, k *kubeOptions, args []string, allNamespaces bool, output string) error {
	if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
		return err
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		jw, err := c.WorkerUsage(ctx, args[0])
		if err != nil {
			return kubeError(err)
		}
		if output == "json" || output == "yaml" {
			return printData(g.io.Out, output, jw)
		}
		return kubecli.PrintJobWorkers(kubeView(g, output), jw)
	}
	jobs, err := c.JobUsage(ctx, allNamespaces)
	if err != nil {
		return kubeError(err)
	}
	if output == "json" || output == "yaml" {
		return printData(g.io.Out, output, nonNil(jobs))
	}
	return kubecli.PrintJobUsage(kubeView(g, output), jobs, allNamespaces, where(c, allNamespaces))
}
