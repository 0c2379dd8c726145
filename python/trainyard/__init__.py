"""trainyard: the in-job helper for scripts started by the Trainyard launcher.

Trainyard puts this package on every worker's PYTHONPATH. It needs only the standard
library; torch is imported by the functions that use it, when they are called. Without
Trainyard (a plain ``python3 train.py``) everything still works, as rank 0 of a world of 1.

A typical script::

    import torch, trainyard

    trainyard.init_process_group()                  # nccl with CUDA, else gloo
    net = MyModel()
    model = trainyard.prepare_model(net)            # on this rank's device; DDP if 2+ ranks
    loader = trainyard.prepare_data_loader(loader)  # sharded across ranks
    start = 0
    if (ckpt := trainyard.get_checkpoint()) is not None:
        state = torch.load(f"{ckpt}/state.pt")
        net.load_state_dict(state["model"])       # net: the model without DDP around it
        start = state["epoch"] + 1
    for epoch in range(start, epochs):
        ...
        folder = None
        if trainyard.get_context().rank == 0:   # replicas: one copy is enough
            folder = trainyard.new_checkpoint_dir()
            torch.save({"model": net.state_dict(), "epoch": epoch}, f"{folder}/state.pt")
        trainyard.report({"loss": loss, "epoch": epoch}, checkpoint=folder)

Every rank may pass a folder: the folders of the same report are merged into one
checkpoint (a sharded model's shards, ``f"{folder}/shard-{rank}.pt"``), committed once every
rank has made that report.

When the job is preempted (a signal, a job of higher priority, a pod evicted),
``trainyard.preemption()`` returns the deadline (None until then): a checkpoint reported
before it is committed before the gang stops, and the next start resumes from it.
"""

from ._checkpoint import get_checkpoint, new_checkpoint_dir
from ._context import Context, get_context
from ._dist import get_device, init_process_group, prepare_data_loader, prepare_model
from ._preempt import Preemption, preemption, preemption_info
from ._report import ReportError, ReportResult, report
from ._rundir import RunFolderError

__all__ = [
    "Context",
    "Preemption",
    "ReportError",
    "ReportResult",
    "RunFolderError",
    "get_checkpoint",
    "get_context",
    "get_device",
    "init_process_group",
    "new_checkpoint_dir",
    "prepare_data_loader",
    "prepare_model",
    "preemption",
    "preemption_info",
    "report",
]
