"""Adapters: a model function (or method) rewritten to call an opmatrix kernel in its place, one per registry site
(opmatrix.sites.registry). Each takes the model's arguments, lays them out as the kernel's spec says
(make_inputs), calls `kernel(workload, inputs)` and hands back what the model's code returns. A call the kernel
cannot serve as the model would raises Unfit naming why; nothing falls back to the original silently.

What an adapter adds around the kernel is part of what validate measures: a copy to the kernel's layout costs time
in the model that the microbenchmark never paid. Those copies are named in each adapter's docstring.
torch is imported by the tensors' own methods only: importing this module imports nothing.
"""
from __future__ import annotations

import functools
import inspect


class Unfit(Exception):
    """The kernel cannot stand in for this call (reason in the message)."""


def rope(original, kernel):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed).

    The model hands q and k over as transposed views (batch, heads, seq, head_dim) of its projections, and cos/sin
    as (1, seq, head_dim) shared by the batch; the kernel takes them contiguous, cos/sin per batch row: the adapter
    copies q and k to contiguous tensors and expands cos/sin (copies the model's eager code does not make: they
    count against the swap). q_embed and k_embed are views of the kernel's one output."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        if args or kwargs:
            bound = signature.bind(q, k, cos, sin, *args, **kwargs)
            bound.apply_defaults()
            unsqueeze_dim = bound.arguments.get("unsqueeze_dim", 1)
            if unsqueeze_dim != 1:
                raise Unfit(f"unsqueeze_dim={unsqueeze_dim}: the rope kernel takes q, k as (batch, heads, seq, "
                            "head_dim) (unsqueeze_dim=1)")
        if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or cos.shape != sin.shape:
            raise Unfit(f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, cos {tuple(cos.shape)}: the rope kernel "
                        "takes q, k (batch, heads, seq, head_dim) and cos, sin (batch, seq, head_dim)")
        if len({q.dtype, k.dtype, cos.dtype, sin.dtype}) != 1:
            raise Unfit(f"dtypes q {q.dtype}, k {k.dtype}, cos {cos.dtype}: the rope kernel takes one dtype")
        batch, heads, seq, head_dim = q.shape
        cos, sin = (t.expand(batch, seq, head_dim).contiguous() for t in (cos, sin))
        workload = {"batch": batch, "heads": heads, "kv_heads": k.shape[1], "seq": seq, "head_dim": head_dim}
        out = kernel(workload, (q.contiguous(), k.contiguous(), cos, sin))
        return out[:, :heads], out[:, heads:]

    return apply_rotary_pos_emb


def rmsnorm(original, kernel):
    """LlamaRMSNorm.forward(self, hidden_states): the kernel on the rows of hidden_states (a view as (tokens,
    hidden); no copy for the model's contiguous activations). The module's epsilon must be the kernel's (its spec's
    EPS) and its weight of the activations' dtype (else the model's output dtype differs)."""

    @functools.wraps(original)
    def forward(self, hidden_states):
        eps = kernel.spec.EPS
        if self.variance_epsilon != eps:
            raise Unfit(f"{type(self).__name__} eps {self.variance_epsilon:g}: the rmsnorm kernel's is {eps:g} "
                        "(kernels/rmsnorm/spec.py EPS)")
        if hidden_states.dtype != self.weight.dtype:
            raise Unfit(f"activations {hidden_states.dtype}, weight {self.weight.dtype}: the kernel takes one dtype")
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1]).contiguous()
        return kernel({"tokens": x.shape[0], "hidden": x.shape[1]}, (x, self.weight)).view(shape)

    return forward


def swiglu_mlp(original, kernel):
    """LlamaMLP.forward(self, x) = down_proj(silu(gate_proj(x)) * up_proj(x)): the projections stay the model's,
    the kernel computes silu(gate) * up on their (tokens, intermediate) outputs (views, no copy). Only for
    hidden_act silu."""

    @functools.wraps(original)
    def forward(self, x):
        act = getattr(getattr(self, "config", None), "hidden_act", None)
        if act != "silu":
            raise Unfit(f"hidden_act {act!r}: the swiglu kernel computes silu(gate) * up")
        gate, up = self.gate_proj(x), self.up_proj(x)
        shape = gate.shape
        gate, up = gate.reshape(-1, shape[-1]).contiguous(), up.reshape(-1, shape[-1]).contiguous()
        y = kernel({"tokens": gate.shape[0], "intermediate": gate.shape[1]}, (gate, up))
        return self.down_proj(y.view(shape))

    return forward
