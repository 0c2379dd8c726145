// Package device finds this machine's NVIDIA GPUs and reserves them for
// training workers.
//
// It is modelled on Nomad's device plugins: [Discover] fingerprints the
// machine and returns an [Inventory]; [Inventory.Visible] applies the
// launcher's own CUDA_VISIBLE_DEVICES restriction, as Ray does; [Assign]
// gives each worker a disjoint set of GPUs; and [Env] turns GPUs into the
// environment variables a process needs to see them (the launcher passes the
// GPUs of all the gang's workers on the machine, see launcher.Proc).
//
// Discovery runs nvidia-smi, the command-line front end of NVML that ships
// with every NVIDIA driver, so the package needs neither cgo nor dlopen and
// the launcher stays a static binary. A machine without a GPU or without a
// driver is not an error: Discover then returns an empty inventory whose
// Source says why.
//
// GPU indices are NVML indices, which follow PCI bus order. [Env] therefore
// sets CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers devices the same
// way, and [Inventory.Visible] reads numeric CUDA_VISIBLE_DEVICES entries as
// NVML indices.
package device
