package device

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/units"
)

// Visible restricts the inventory to the GPUs that the launcher's own
// CUDA_VISIBLE_DEVICES allows, as Ray does. set says whether the variable
// is set at all; if not, the inventory is returned unchanged.
//
// Entries are NVML indices, UUIDs ("GPU-5d1f...") or unique UUID prefixes
// ("GPU-5d1f"), separated by commas. An empty value, or "-1" or
// "NoDevFiles", hides every GPU. An entry that matches no GPU, an ambiguous
// prefix, or two entries naming the same GPU is an error. An inventory that
// has no GPU to begin with is returned unchanged, keeping its reason.
func (inv Inventory) Visible(cudaVisibleDevices string, set bool) (Inventory, error) {
	if !set || len(inv.GPUs) == 0 {
		return inv, nil
	}
	value := strings.TrimSpace(cudaVisibleDevices)
	if hidesAll(value) {
		why := fmt.Sprintf("the launcher's CUDA_VISIBLE_DEVICES=%q hides every GPU", cudaVisibleDevices)
		return Inventory{DriverVersion: inv.DriverVersion, Source: "none: " + why}, nil
	}
	gpus, err := inv.pick(strings.Split(value, ","))
	if err != nil {
		return Inventory{}, fmt.Errorf("CUDA_VISIBLE_DEVICES=%q: %w", cudaVisibleDevices, err)
	}
	return Inventory{
		GPUs:          gpus,
		DriverVersion: inv.DriverVersion,
		Source:        fmt.Sprintf("%s, restricted by CUDA_VISIBLE_DEVICES=%s", inv.Source, value),
	}, nil
}

// hidesAll reports whether a CUDA_VISIBLE_DEVICES value hides every GPU.
func hidesAll(value string) bool {
	return value == "" || value == "-1" || value == "NoDevFiles"
}

// pick returns the GPUs named by entries, in inventory (index) order.
func (inv Inventory) pick(entries []string) ([]GPU, error) {
	chosen := map[int]string{} // position in inv.GPUs -> entry naming it
	for _, e := range entries {
		e = strings.TrimSpace(e)
		i, err := inv.match(e)
		if err != nil {
			return nil, err
		}
		if prev, dup := chosen[i]; dup {
			return nil, fmt.Errorf("entries %q and %q both name GPU %d", prev, e, inv.GPUs[i].Index)
		}
		chosen[i] = e
	}
	var gpus []GPU
	for i, g := range inv.GPUs {
		if _, ok := chosen[i]; ok {
			gpus = append(gpus, g)
		}
	}
	return gpus, nil
}

// match returns the position in inv.GPUs of the one GPU an entry names.
func (inv Inventory) match(entry string) (int, error) {
	if entry == "" {
		return 0, fmt.Errorf("empty entry")
	}
	if n, err := strconv.Atoi(entry); err == nil {
		return inv.matchIndex(entry, n)
	}
	return inv.matchUUID(entry)
}

// matchIndex finds the GPU whose NVML index is n.
func (inv Inventory) matchIndex(entry string, n int) (int, error) {
	for i, g := range inv.GPUs {
		if g.Index == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("entry %q matches no GPU: %s", entry, inv.describe())
}

// matchUUID finds the one GPU whose UUID is entry or starts with it.
func (inv Inventory) matchUUID(entry string) (int, error) {
	found := -1
	for i, g := range inv.GPUs {
		if !strings.HasPrefix(g.UUID, entry) {
			continue
		}
		if g.UUID == entry {
			return i, nil
		}
		if found >= 0 {
			return 0, fmt.Errorf("entry %q is ambiguous: it prefixes %s and %s",
				entry, inv.GPUs[found].UUID, g.UUID)
		}
		found = i
	}
	if found >= 0 {
		return found, nil
	}
	if strings.HasPrefix(entry, "MIG-") {
		return 0, fmt.Errorf("entry %q is a MIG instance; only whole GPUs are supported", entry)
	}
	return 0, fmt.Errorf("entry %q matches no GPU: %s", entry, inv.describe())
}

// describe lists the inventory's GPUs for error messages.
func (inv Inventory) describe() string {
	parts := make([]string, len(inv.GPUs))
	for i, g := range inv.GPUs {
		parts[i] = fmt.Sprintf("%d=%s", g.Index, g.UUID)
	}
	return fmt.Sprintf("this machine has %s (%s)", units.Count(len(inv.GPUs), "GPU"), strings.Join(parts, ", "))
}
