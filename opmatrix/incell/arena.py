"""Memory the judge owns and one worker may use: the input and output buffers of that worker's calls.

An arena is one block of bytes with tensors laid out in it (each at an offset aligned to ALIGN bytes, with its own
shape and strides). The judge makes it and writes into it; the worker maps the same bytes and calls its kernel on
the tensors. Nothing else is shared: the fresh contents, their references and the choice of which calls are checked
stay in the judge's own memory.
- CPU: a memfd (an anonymous file, never in a folder another process could list), mapped by both processes; the
  descriptor travels over the channel (opmatrix.incell.channel).
- GPU: one device allocation of the judge's, opened by the worker through CUDA IPC (opmatrix.incell.cuda_ipc).
Stdlib only at import; torch arrives with the first arena.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

ALIGN = 256  # every tensor starts at a multiple of this many bytes (any element size, GPU vector loads)


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class Layout:
    """Where one tensor lives in an arena: its byte offset, dtype name, shape and strides (in elements)."""

    offset: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    def extent(self, itemsize: int) -> int:
        """Bytes from the tensor's first element to one past its last (0 for an empty tensor)."""
        if any(s == 0 for s in self.shape):
            return 0
        return itemsize * (1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)))


def dense_stride(tensor) -> tuple[int, ...]:
    """The tensor's own strides where they lay its elements out without gaps or overlaps (a permuted layout, a
    transposed matrix), else the contiguous strides of its shape (an expanded or sliced view gets its own copy)."""
    shape, stride = tuple(tensor.shape), tuple(tensor.stride())
    order = sorted(range(len(shape)), key=lambda d: (stride[d], shape[d]))
    expected = 1
    for d in order:
        if shape[d] != 1 and stride[d] != expected:
            return contiguous(shape)
        expected *= shape[d]
    return stride


def contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, step = [], 1
    for n in reversed(shape):
        stride.append(step)
        step *= max(n, 1)
    return tuple(reversed(stride))


def plan(likes: list, start: int = 0) -> tuple[list[Layout], int]:
    """Layouts for tensors of the same dtype, shape and (dense) strides as `likes`, packed from `start`; returns
    them and the first free byte after them."""
    torch, layouts, at = _torch(), [], start
    for like in likes:
        dtype = str(like.dtype).removeprefix("torch.")
        layout = Layout(at, dtype, tuple(like.shape), dense_stride(like))
        layouts.append(layout)
        size = layout.extent(torch.empty((), dtype=like.dtype).element_size())
        at += -(-max(size, 1) // ALIGN) * ALIGN
    return layouts, at


def view(storage_tensor, layout: Layout):
    """The tensor `layout` describes inside an arena's bytes (a uint8 tensor)."""
    torch = _torch()
    dtype = getattr(torch, layout.dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    out = torch.empty(0, dtype=dtype, device=storage_tensor.device)
    return out.set_(storage_tensor.untyped_storage(), layout.offset // itemsize, layout.shape, layout.stride)


class Arena:
    """The judge's side: `nbytes` of shared memory on `device` ("cpu" or "cuda"), and what a worker needs to map it
    (`handover()`: a picklable description and the descriptors to send with it)."""

    def __init__(self, nbytes: int, device: str) -> None:
        torch = _torch()
        self.nbytes, self.device = max(int(nbytes), ALIGN), device
        self.fd = self.allocation = None
        if device == "cpu":
            self.fd = os.memfd_create("opmatrix-arena", os.MFD_CLOEXEC)
            os.ftruncate(self.fd, self.nbytes)
            self.bytes = torch.from_file(f"/proc/self/fd/{self.fd}", shared=True, size=self.nbytes, dtype=torch.uint8)
        else:
            from opmatrix.incell import cuda_ipc

            self.allocation = cuda_ipc.Allocation(self.nbytes)
            self.bytes = self.allocation.tensor

    def handover(self) -> tuple[tuple, list[int]]:
        """What the worker opens the arena with (plain values) and the descriptors to send beside it."""
        if self.fd is not None:
            return ("memfd", self.nbytes), [self.fd]
        return ("cuda-ipc", (self.allocation.handle, self.nbytes)), []

    def view(self, layout: Layout):
        return view(self.bytes, layout)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.allocation is not None:
            self.allocation.free()
            self.allocation = None
        self.bytes = None


def open_handed(description: tuple, fds: list[int]):
    """The worker's side: the arena's bytes (a uint8 tensor) from what Arena.handover() sent."""
    torch = _torch()
    kind, detail = description
    if kind == "memfd":
        (fd,) = fds
        try:
            return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=detail, dtype=torch.uint8)
        finally:
            os.close(fd)
    from opmatrix.incell import cuda_ipc

    handle, nbytes = detail
    return cuda_ipc.Opened(handle, nbytes).tensor
