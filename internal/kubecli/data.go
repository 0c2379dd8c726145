package kubecli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Claims returns the PersistentVolumeClaims of the namespace (or of all), by namespace
// and name: the data a job can mount with --data NAME:PATH.
func (c *Cluster) Claims(ctx context.Context, allNamespaces bool) ([]corev1.PersistentVolumeClaim, error) {
	ns := c.Namespace
	if allNamespaces {
		ns = ""
	}
	list, err := c.Core.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.explain(err)
	}
	claims := list.Items
	slices.SortFunc(claims, func(a, b corev1.PersistentVolumeClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return claims, nil
}

// PrintClaims writes the claims as Arena's data list and kubectl get pvc show them:
// name, status, capacity, access modes, storage class, age.
func PrintClaims(v View, claims []corev1.PersistentVolumeClaim, allNamespaces bool, where string) error {
	if len(claims) == 0 {
		_, err := fmt.Fprintf(v.Out, "No PersistentVolumeClaims in %s.\n", where)
		return err
	}
	tw := v.table()
	header := "NAME\tSTATUS\tCAPACITY\tACCESS MODES\tSTORAGECLASS\tAGE"
	if allNamespaces {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for i := range claims {
		p := &claims[i]
		capacity := "-"
		if q, ok := p.Status.Capacity[corev1.ResourceStorage]; ok {
			capacity = q.String()
		} else if q, ok := p.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			capacity = q.String() + " (requested)"
		}
		modes := make([]string, 0, len(p.Spec.AccessModes))
		for _, m := range p.Spec.AccessModes {
			modes = append(modes, accessMode(m))
		}
		class := "-"
		if p.Spec.StorageClassName != nil {
			class = orDash(*p.Spec.StorageClassName)
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", p.Name, orDash(string(p.Status.Phase)), capacity,
			orDash(strings.Join(modes, ",")), class, v.age(p.CreationTimestamp))
		if allNamespaces {
			row = p.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// accessMode abbreviates an access mode as kubectl does: RWO, ROX, RWX, RWOP.
func accessMode(m corev1.PersistentVolumeAccessMode) string {
	switch m {
	case corev1.ReadWriteOnce:
		return "RWO"
	case corev1.ReadOnlyMany:
		return "ROX"
	case corev1.ReadWriteMany:
		return "RWX"
	case corev1.ReadWriteOncePod:
		return "RWOP"
	}
	return string(m)
}
