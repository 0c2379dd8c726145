package v1alpha1

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// crd is the part of the generated CustomResourceDefinition the tests look at.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind       string   `json:"kind"`
			Plural     string   `json:"plural"`
			ShortNames []string `json:"shortNames"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name          string `json:"name"`
			Served        bool   `json:"served"`
			Storage       bool   `json:"storage"`
			PrinterColumn []struct {
				Name string `json:"name"`
			} `json:"additionalPrinterColumns"`
			Subresources map[string]any `json:"subresources"`
			Schema       struct {
				OpenAPIV3Schema struct {
					Properties struct {
						Spec struct {
							Required   []string `json:"required"`
							Properties map[string]struct {
								Minimum *float64 `json:"minimum"`
							} `json:"properties"`
						} `json:"spec"`
					} `json:"properties"`
				} `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// The CRD that controller-gen makes from this package's markers (make generate) serves
// the same TrainJob type: the group, kind, printer columns, status subresource and the
// validation of the fields that the local backends validate too.
func TestGeneratedCRD(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/trainyard.dev_trainjobs.yaml")
	if err != nil {
		t.Fatalf("read the generated CRD (run make generate): %v", err)
	}
	var c crd
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	if s.Group != Group || s.Names.Kind != Kind || s.Names.Plural != "trainjobs" || s.Scope != "Namespaced" {
		t.Errorf("group %q kind %q plural %q scope %q", s.Group, s.Names.Kind, s.Names.Plural, s.Scope)
	}
	if diff := cmp.Diff([]string{"tj"}, s.Names.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != Version || !s.Versions[0].Served || !s.Versions[0].Storage {
		t.Fatalf("versions: %+v", s.Versions)
	}
	v := s.Versions[0]
	var columns []string
	for _, p := range v.PrinterColumn {
		columns = append(columns, p.Name)
	}
	if diff := cmp.Diff([]string{"Phase", "Ready", "Workers", "GPUs", "Restarts", "Age"}, columns); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
	if _, ok := v.Subresources["status"]; !ok {
		t.Error("no status subresource")
	}
	spec := v.Schema.OpenAPIV3Schema.Properties.Spec
	if diff := cmp.Diff([]string{"command"}, spec.Required); diff != "" {
		t.Errorf("required spec fields (-want +got):\n%s", diff)
	}
	for _, field := range []string{"workers", "procsPerWorker"} {
		if m := spec.Properties[field].Minimum; m == nil || *m != 1 {
			t.Errorf("spec.%s minimum = %v, want 1", field, m)
		}
	}
	if _, ok := spec.Properties["kubernetes"]; !ok {
		t.Error("spec.kubernetes missing")
	}
}
