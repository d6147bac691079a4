"""Device memory the judge allocates and a worker opens: CUDA IPC through the driver API (libcuda, ctypes), so that
it does not depend on torch's private sharing functions (a [[compare]]'s candidate toolchain runs another torch).

The judge allocates with cuMemAlloc in the primary context torch made current, exports a handle
(cuIpcGetMemHandle, 64 bytes) and frees the memory when it is done; the worker opens the handle
(cuIpcOpenMemHandle) in its own context. Each side wraps the address in a torch uint8 tensor through
__cuda_array_interface__ (zero copy). Stdlib only at import.
"""
from __future__ import annotations

import ctypes

IPC_HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1


class CudaError(RuntimeError):
    """A CUDA driver call failed (its name and error code)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]  # bytes, NULs included (c_char would stop at one)


_lib = None


def _cuda():
    global _lib
    if _lib is None:
        import torch

        if torch.version.hip:
            raise CudaError("the judge shares GPU memory through CUDA IPC; on ROCm (HIP IPC) it cannot yet, so a "
                            "ROCm GPU's jobs cannot be judged")
        _lib = ctypes.CDLL("libcuda.so.1")
    return _lib


def _call(name: str, *args) -> None:
    code = getattr(_cuda(), name)(*args)
    if code != 0:
        raise CudaError(f"{name} failed with CUDA error {code}")


class _Interface:
    """What torch.as_tensor reads to wrap device memory it does not own."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def wrap(address: int, nbytes: int, keep=None):
    """A torch uint8 CUDA tensor over `nbytes` at `address`; `keep` stays alive as long as the tensor's memory."""
    import torch

    interface = _Interface(address, nbytes)
    tensor = torch.as_tensor(interface, device="cuda")
    tensor._opmatrix_keep = (interface, keep)
    return tensor


class Allocation:
    """The judge's side: device memory of its own and the handle a worker opens it with."""

    def __init__(self, nbytes: int) -> None:
        import torch

        torch.cuda.init()
        torch.cuda.synchronize()  # the primary context is current on this thread
        pointer = ctypes.c_uint64()
        _call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        self.address, self.nbytes = pointer.value, nbytes
        handle = _Handle()
        _call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(self.address))
        self.handle = bytes(bytearray(handle.reserved))
        self.tensor = wrap(self.address, nbytes, self)

    def free(self) -> None:
        if self.address:
            import torch

            torch.cuda.synchronize()
            _call("cuMemFree_v2", ctypes.c_uint64(self.address))
            self.address = 0


class Opened:
    """The worker's side: the judge's memory, opened through its handle, closed when the worker ends."""

    def __init__(self, handle: bytes, nbytes: int) -> None:
        import torch

        torch.cuda.init()
        torch.cuda.synchronize()
        pointer = ctypes.c_uint64()
        raw = _Handle()
        ctypes.memmove(ctypes.byref(raw), handle, IPC_HANDLE_BYTES)
        _call("cuIpcOpenMemHandle_v2", ctypes.byref(pointer), raw, ctypes.c_uint(LAZY_ENABLE_PEER_ACCESS))
        self.address = pointer.value
        self.tensor = wrap(self.address, nbytes, self)
