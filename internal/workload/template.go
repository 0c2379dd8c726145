package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kjson "sigs.k8s.io/json"
)

// mergeKeyed are the lists of a pod spec that the merge matches by name.
var mergeKeyed = []string{"containers", "initContainers", "volumes"}

// ValidateTemplate checks a TrainJob's spec.kubernetes.podTemplate before it is merged:
// it must be a partial pod template (metadata and spec) whose fields exist and have their
// types, and whose containers, init containers and volumes have names. Its errors name
// the field (spec.containers.name); strategic merge's own directives ($patch, ...) are
// allowed. Without it, some templates panic inside the merge: {spec: {containers: [{name: []}]}}.
func ValidateTemplate(patch []byte) error {
	var raw any
	if err := json.Unmarshal(patch, &raw); err != nil {
		return err
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("must be an object (a partial pod template: metadata and spec), not %s", jsonKind(raw))
	}
	data, err := json.Marshal(withoutDirectives(obj))
	if err != nil {
		return err
	}
	var t corev1.PodTemplateSpec
	strict, err := kjson.UnmarshalStrict(data, &t)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return errors.Join(strict...)
	}
	spec, _ := obj["spec"].(map[string]any)
	for _, list := range mergeKeyed {
		items, _ := spec[list].([]any)
		for i, item := range items {
			m, _ := item.(map[string]any)
			if name, _ := m["name"].(string); name == "" && !hasDirective(m) {
				return fmt.Errorf("spec.%s[%d].name: required: %s are merged by name (the worker container is %q)", list, i, list, WorkerContainer)
			}
		}
	}
	return nil
}

// withoutDirectives returns v without the keys of strategic merge's directives ($patch,
// $retainKeys, $setElementOrder/..., $deleteFromPrimitiveList/...), which are no fields.
func withoutDirectives(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if !strings.HasPrefix(k, "$") {
				out[k] = withoutDirectives(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutDirectives(e)
		}
		return out
	}
	return v
}

func hasDirective(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// jsonKind names a decoded JSON value's kind.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "an object"
}

// mergeTemplate merges the user's partial pod template over pod as a strategic merge
// patch, after ValidateTemplate, and refuses fields a pod template does not have.
// Trainyard's labels win over the template's: the gang's NetworkPolicy and the operator
// select the pods by them.
func mergeTemplate(pod *corev1.PodTemplateSpec, patch []byte) (merged *corev1.PodTemplateSpec, err error) {
	if err := ValidateTemplate(patch); err != nil {
		return nil, fmt.Errorf("spec.kubernetes.podTemplate: %w", err)
	}
	orig, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode the pod template: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			merged, err = nil, fmt.Errorf("spec.kubernetes.podTemplate: does not merge over the rendered pod template: %v", r)
		}
	}()
	data, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("spec.kubernetes.podTemplate: %w", err)
	}
	var out corev1.PodTemplateSpec
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("spec.kubernetes.podTemplate: %w", err)
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range pod.Labels {
		if strings.HasPrefix(k, "trainyard.dev/") || k == LabelManagedBy {
			out.Labels[k] = v
		}
	}
	return &out, nil
}
