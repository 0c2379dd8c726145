package device

// GPU is one NVIDIA GPU as NVML reports it.
type GPU struct {
	// Index is the NVML index, which follows PCI bus order.
	Index int
	// UUID is the GPU's unique identifier, "GPU-...".
	UUID string
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3"; empty if unknown.
	Name string
	// MemoryMiB is the total memory in MiB; 0 if unknown.
	MemoryMiB int64
	// UtilizationPercent is the recent GPU utilisation; -1 if unknown.
	UtilizationPercent int
	// MemoryUsedMiB is the memory in use in MiB; 0 if unknown.
	MemoryUsedMiB int64
}

// Inventory is what discovery found.
type Inventory struct {
	// GPUs are the usable GPUs, in index order.
	GPUs []GPU
	// DriverVersion is the NVIDIA driver version; empty if unknown.
	DriverVersion string
	// Source says where the GPUs came from, e.g. "nvidia-smi (NVML)", or,
	// when there are none, "none: <why>".
	Source string
}

// sourceNVML is the Source of an inventory that nvidia-smi reported.
const sourceNVML = "nvidia-smi (NVML)"

// none returns an empty inventory whose Source explains why it is empty.
func none(why string) Inventory {
	return Inventory{Source: "none: " + why}
}
