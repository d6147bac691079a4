"""PyTorch eager: the framework baseline every other backend is compared against."""
from opmatrix.kit import require


def available() -> str:
    torch = require("torch")
    return torch.__version__


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return None
    build = "rocm" if torch.version.hip else "cuda" if torch.version.cuda else "cpu"
    wanted = "rocm" if device.vendor == "amd" else "cuda"
    if build != wanted:
        return f"this torch build ({torch.__version__}) is for {build}, the device needs {wanted}"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no {wanted} device on this host"
    return None
