package install

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An operator that watches one namespace (Options.WatchNamespace) gets the generated
// rules (config/rbac/role.yaml, from the markers in internal/operator) split by where
// they hold; the Helm chart splits them the same way (charts/trainyard/templates/rbac.yaml).
var (
	// clusterResources are cluster-scoped, or read outside the watched namespace (the
	// kubernetes EndpointSlice in default): they stay in the ClusterRole. Nodes are read
	// for the GPU check, TokenReviews and SubjectAccessReviews are made for the metrics,
	// Kueue's ResourceFlavors and PriorityClasses are read for a queued gang.
	clusterResources = []string{"nodes", "tokenreviews", "subjectaccessreviews", "endpointslices", "resourceflavors", "priorityclasses"}
	// electionResources are what leader election uses in the operator's own namespace.
	electionResources = []string{"leases", "events"}
	// electionOnly are used there only.
	electionOnly = []string{"leases"}
)

// ElectionRoleName names the Role that lets the operator elect a leader in its namespace
// when it watches another.
const ElectionRoleName = Name + "-leader-election"

// splitRole returns the objects that grant the generated ClusterRole's rules to an
// operator that watches one namespace: a ClusterRole of the cluster-wide rules, a Role
// in the watched namespace, and a Role for leader election in the operator's.
func splitRole(role *unstructured.Unstructured, o Options) []*unstructured.Unstructured {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	pick := func(keep func(string) bool) []any {
		var out []any
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			var picked []any
			for _, res := range resources {
				if keep(res) {
					picked = append(picked, res)
				}
			}
			if len(picked) > 0 {
				copied := runtimeCopy(rule)
				copied["resources"] = picked
				out = append(out, copied)
			}
		}
		return out
	}
	cluster := role.DeepCopy()
	cluster.Object["rules"] = pick(func(r string) bool { return slices.Contains(clusterResources, r) })
	watched := roleObject(Name, o.WatchNamespace, pick(func(r string) bool {
		return !slices.Contains(clusterResources, r) && !slices.Contains(electionOnly, r)
	}))
	election := roleObject(ElectionRoleName, o.Namespace, pick(func(r string) bool { return slices.Contains(electionResources, r) }))
	return []*unstructured.Unstructured{cluster, watched, election}
}

func roleObject(name, namespace string, rules []any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "Role",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"rules":      rules,
	}}
}

// runtimeCopy copies a rule of an unstructured object.
func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
