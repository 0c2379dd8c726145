package jobspec

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// scalarStrings rewrites the numbers and booleans of spec.command, spec.args and
// spec.env[].value as strings, each with its text in the job file (1, 0.5, 1e-3, true),
// as Kubernetes users write args: [--epochs, 3]. A list or a mapping there is an error
// that names the element. data is the job file, js the same as JSON; js is returned
// unchanged when there is nothing to rewrite.
func scalarStrings(data, js []byte) ([]byte, error) {
	var doc map[string]stdjson.RawMessage
	if stdjson.Unmarshal(js, &doc) != nil {
		return js, nil // the strict decoder says what is wrong
	}
	var spec map[string]stdjson.RawMessage
	if stdjson.Unmarshal(doc["spec"], &spec) != nil {
		return js, nil
	}
	src := yamlChild(yamlRoot(data), "spec")
	changed := false
	for _, field := range []string{"command", "args"} {
		var items []stdjson.RawMessage
		if stdjson.Unmarshal(spec[field], &items) != nil {
			continue // not a list: the strict decoder says so
		}
		n := 0
		for i, item := range items {
			text, err := scalarText(item, yamlItem(yamlChild(src, field), i))
			if err != nil {
				return nil, fmt.Errorf("spec.%s[%d]: %w", field, i, err)
			}
			if text != nil {
				items[i], n = text, n+1
			}
		}
		if n > 0 {
			spec[field], changed = mustMarshal(items), true
		}
	}
	var env []map[string]stdjson.RawMessage
	if stdjson.Unmarshal(spec["env"], &env) == nil {
		n := 0
		for i, v := range env {
			raw, ok := v["value"]
			if !ok {
				continue
			}
			text, err := scalarText(raw, yamlChild(yamlItem(yamlChild(src, "env"), i), "value"))
			if err != nil {
				var name string
				_ = stdjson.Unmarshal(v["name"], &name)
				return nil, fmt.Errorf("spec.env[%d].value (%s): %w", i, name, err)
			}
			if text != nil {
				v["value"], n = text, n+1
			}
		}
		if n > 0 {
			spec["env"], changed = mustMarshal(env), true
		}
	}
	if !changed {
		return js, nil
	}
	doc["spec"] = mustMarshal(spec)
	return mustMarshal(doc), nil
}

// scalarText returns a number or a boolean as a JSON string of its text, taken from node
// when the YAML has it there; nil for a string or null, which stay as they are; an error
// for a list or a mapping.
func scalarText(item stdjson.RawMessage, node *yaml.Node) (stdjson.RawMessage, error) {
	item = bytes.TrimSpace(item)
	switch {
	case len(item) == 0 || item[0] == '"' || string(item) == "null":
		return nil, nil
	case item[0] == '[':
		return nil, fmt.Errorf("expected a string, a number or true/false, got a list (%s); quote it if it is text", item)
	case item[0] == '{':
		return nil, fmt.Errorf("expected a string, a number or true/false, got a mapping (%s); quote it if it is text", item)
	}
	text := string(item)
	if node != nil && node.Kind == yaml.ScalarNode {
		text = node.Value
	}
	return mustMarshal(text), nil
}

// yamlRoot returns the mapping at the top of data's first document, or nil when data
// does not parse as YAML 1.2 (then scalars keep the text of their JSON form).
func yamlRoot(data []byte) *yaml.Node {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return deref(doc.Content[0])
}

// yamlChild returns the value of key in mapping m, or nil.
func yamlChild(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}

// yamlItem returns item i of sequence s, or nil.
func yamlItem(s *yaml.Node, i int) *yaml.Node {
	if s == nil || s.Kind != yaml.SequenceNode || i >= len(s.Content) {
		return nil
	}
	return deref(s.Content[i])
}

// deref follows an alias (*name) to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mustMarshal marshals what came from JSON, or a string, which cannot fail.
func mustMarshal(v any) stdjson.RawMessage {
	b, err := stdjson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
