package workload

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Placement is where a queue that admitted the gang put it: Kueue's ResourceFlavors give
// node labels the workers must run on and taints they must tolerate. The zero value (and
// nil) changes nothing.
type Placement struct {
	// NodeSelector is added to the workers' node selector; a key the job sets itself keeps
	// the admission's value, as Kueue does for the Jobs it admits.
	NodeSelector map[string]string
	// Tolerations are added to the workers' tolerations, once each.
	Tolerations []corev1.Toleration
}

// apply adds the placement to a worker's pod spec.
func (p *Placement) apply(spec *corev1.PodSpec) {
	if p == nil {
		return
	}
	if len(p.NodeSelector) > 0 {
		sel := maps.Clone(spec.NodeSelector)
		if sel == nil {
			sel = map[string]string{}
		}
		maps.Copy(sel, p.NodeSelector)
		spec.NodeSelector = sel
	}
	for _, t := range p.Tolerations {
		if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}
