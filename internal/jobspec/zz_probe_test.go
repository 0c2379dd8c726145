package jobspec

import ("testing"; "sigs.k8s.io/yaml")

func TestZZProbe(t *testing.T) {
	for _, s := range []string{
		"apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  workers: 1\n  workers: 2\n",
		"apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [a\n",
		"a: 1\nb: &x 2\nc: *x\n",
		"a: 1\nb:\n  - c: 1\n    c: 2\n",
	} {
		_, err := yaml.YAMLToJSONStrict([]byte(s))
		t.Logf("%q\n   => %v", s, err)
	}
}
