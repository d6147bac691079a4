"""Eager PyTorch, written as transformers' Llama writes it (`rotate_half`, `apply_rotary_pos_emb`): per tensor
two products, a slice-negate-concatenate and an add, each its own kernel. The final add of each writes into its
slice of `out` (`out=`), where the model would allocate q_embed and k_embed: the same memory traffic, no copy."""
import torch

from opmatrix.kit import Built


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def build(workload, dtype, device, variant):
    heads = workload["heads"]

    def rope(q, k, cos, sin, out):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # unsqueeze_dim=1: broadcast over the heads
        torch.add(q * cos, _rotate_half(q) * sin, out=out[:, :heads])
        torch.add(k * cos, _rotate_half(k) * sin, out=out[:, heads:])

    return Built(rope)
