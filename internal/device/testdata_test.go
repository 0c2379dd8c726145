package device

// h100Output is what nvidia-smi prints for the discovery query on a machine
// with four H100s.
const h100Output = `0, GPU-5d1f3c8e-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 1, 0, 550.54.15
1, GPU-7a2b9c0d-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 40210, 97, 550.54.15
2, GPU-7a2bffff-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 1, 0, 550.54.15
3, GPU-e0e0e0e0-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 1, 3, 550.54.15
`

// h100 returns the GPU with index i from h100Output.
func h100(i int) GPU {
	uuids := []string{
		"GPU-5d1f3c8e-1111-2222-3333-444455556666",
		"GPU-7a2b9c0d-1111-2222-3333-444455556666",
		"GPU-7a2bffff-1111-2222-3333-444455556666",
		"GPU-e0e0e0e0-1111-2222-3333-444455556666",
	}
	used := []int64{1, 40210, 1, 1}
	util := []int{0, 97, 0, 3}
	return GPU{
		Index: i, UUID: uuids[i], Name: "NVIDIA H100 80GB HBM3",
		MemoryMiB: 81559, MemoryUsedMiB: used[i], UtilizationPercent: util[i],
	}
}

// h100s returns the GPUs with the given indices from h100Output.
func h100s(indices ...int) []GPU {
	gpus := make([]GPU, len(indices))
	for i, n := range indices {
		gpus[i] = h100(n)
	}
	return gpus
}

// h100Inventory is the inventory discovered from h100Output.
func h100Inventory() Inventory {
	return Inventory{GPUs: h100s(0, 1, 2, 3), DriverVersion: "550.54.15", Source: sourceNVML}
}
