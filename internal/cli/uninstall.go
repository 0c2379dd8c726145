package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/install"
)

const uninstallLong = `Remove what 'trainyard install' put on a Kubernetes cluster, printing one line
per object: first the TrainJob CRD, waiting until it is gone (the operator still runs then,
so it can release the TrainJobs it holds), then the operator's Deployment, bindings,
ServiceAccount and ClusterRoles (and the Roles an install with --watch-namespace made,
wherever they are), and last the namespace, if 'trainyard install' created it. Objects
already gone are reported and skipped, so uninstalling twice is fine.

Deleting the CRD deletes every TrainJob in the cluster, and with them their Jobs and pods:
running training stops. So does deleting the namespace for the TrainJobs in it. When any
TrainJob (or a PersistentVolumeClaim in the namespace) would be deleted, uninstall
refuses and deletes nothing unless given --yes; --keep-crd keeps the CRD and every
TrainJob. --dry-run makes the same checks and asks the API server to dry-run each
deletion, which checks permissions too, but deletes nothing.`

const uninstallExample = `  trainyard uninstall --dry-run
  trainyard uninstall --keep-crd
  trainyard uninstall --yes`

func newUninstallCommand(g *globals) *cobra.Command {
	var f installFlags
	var u install.UninstallOptions
	cmd := &cobra.Command{
		Use:     "uninstall",
		Short:   "Remove the operator (and, unless --keep-crd, the TrainJob CRD) from a cluster",
		Long:    uninstallLong,
		Example: uninstallExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := install.ValidateNamespace(f.opts.Namespace); err != nil {
				return usageError(fmt.Errorf("--namespace: %w", err))
			}
			u.DryRun = f.dryRun
			return f.run(cmd.Context(), g, func(ctx context.Context, t install.Target) error {
				return t.Uninstall(ctx, f.opts, u)
			})
		},
	}
	f.bind(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "check and report what would be deleted; delete nothing")
	fs.BoolVar(&u.KeepCRD, "keep-crd", false, "keep the TrainJob CRD, and so every TrainJob")
	fs.BoolVarP(&u.Yes, "yes", "y", false, "delete even if TrainJobs (or PersistentVolumeClaims in the namespace) go with it")
	fs.StringVar(&f.opts.RayAPI.Namespace, "ray-api-namespace", "default", "also delete Ray's Jobs API that install --ray-api-image made in this namespace, if it is there")
	return cmd
}
