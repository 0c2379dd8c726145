package device

import (
	"strconv"
	"strings"
)

// Env returns the environment variables that give a process exactly the
// GPUs gpus (the launcher passes those reserved for the gang's workers on
// this machine). With GPUs, CUDA_VISIBLE_DEVICES lists their NVML
// indices and CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA number devices in the
// same PCI bus order as NVML. Without any, CUDA_VISIBLE_DEVICES is empty and
// NVIDIA_VISIBLE_DEVICES=void keeps a container runtime from adding GPUs.
func Env(gpus []GPU) map[string]string {
	if len(gpus) == 0 {
		return map[string]string{
			"CUDA_VISIBLE_DEVICES":   "",
			"NVIDIA_VISIBLE_DEVICES": "void",
		}
	}
	indices := make([]string, len(gpus))
	for i, g := range gpus {
		indices[i] = strconv.Itoa(g.Index)
	}
	return map[string]string{
		"CUDA_VISIBLE_DEVICES": strings.Join(indices, ","),
		"CUDA_DEVICE_ORDER":    "PCI_BUS_ID",
	}
}
