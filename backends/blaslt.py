"""The vendor's fused path: cuBLASLt (NVIDIA) / hipBLASLt (AMD) matmul with the activation applied in the GEMM
epilogue, reached through torch (`torch._addmm_activation`). No compiler of ours involved: what the vendor library
gives for free when the framework asks for the fused op."""
from opmatrix.kit import Unavailable, require


def available() -> str:
    torch = require("torch")
    if not hasattr(torch, "_addmm_activation"):
        raise Unavailable(f"torch {torch.__version__} has no _addmm_activation (fused GEMM epilogue)")
    return torch.__version__


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        return "the fused epilogue is a cuBLASLt / hipBLASLt feature; on CPU torch runs addmm and relu separately"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    return None
