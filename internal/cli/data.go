package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/kubecli"
)

func newDataCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "List the data a cluster's jobs can mount (Arena's data list): data list --kube",
	}
	cmd.AddCommand(newDataListCommand(g))
	return cmd
}

func newDataListCommand(g *globals) *cobra.Command {
	var (
		kube   kubeOptions
		all    bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the PersistentVolumeClaims that submit --kube --data NAME:PATH mounts",
		Long: `List the PersistentVolumeClaims of the namespace (-A: of all), as Arena's 'data list'
does: each one's name, status, capacity, access modes (RWO, ROX, RWX), storage class and
age. 'trainyard submit --kube --data NAME:PATH' mounts the claim NAME at PATH in every
worker (NAME:PATH:ro read-only). On this machine or a trainyard server there is no
volume to mount: jobs read their data from its path.` + kubeHelp,
		Example: `  trainyard data list --kube
  trainyard data list --kube -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if !on {
				return usageError(errors.New("data list lists a Kubernetes cluster's PersistentVolumeClaims: add --kube " +
					"(on this machine and on a trainyard server, jobs read their data from its path)"))
			}
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			c, err := kube.connect(g)
			if err != nil {
				return err
			}
			claims, err := c.Claims(cmd.Context(), all)
			if err != nil {
				return kubeError(err)
			}
			if output != "" {
				return printData(g.io.Out, output, claims)
			}
			where := "namespace " + c.Namespace
			if all {
				where = "any namespace"
			}
			return kubecli.PrintClaims(kubeView(g, output), claims, all, where)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "with --kube: the claims of every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp("json", "yaml"))
	kube.only("all-namespaces")
	return cmd
}
