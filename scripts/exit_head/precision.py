"""Mixed-precision training for both draft-head trainers (--precision).

f32 (the default) runs every operation in float32. bf16 runs the head's forward under PyTorch's
CPU autocast with bfloat16 (its matrix products in bf16 with float32 accumulation; the weights,
the optimiser's state and the loss stay float32, the usual mixed-precision recipe of EAGLE's and
most LLM training). The loss reads a float32 copy of the head's output (loss_leaf), and the
gradient flows back in the output's own dtype (output_gradient). Evaluations always run in
float32, so held-out agreements compare across precisions. On CPUs with AVX512_BF16 or AMX (Zen 4
and later, Sapphire Rapids and later) oneDNN runs bf16 matrix products about 3x faster than
float32 ones, which is why the recipe uses it; elsewhere bf16 is emulated and slower.
"""

import contextlib

import torch

kChoices = ("f32", "bf16")


def add_argument(parser):
    parser.add_argument("--precision", choices=kChoices, default="f32",
                        help="the head's forward and backward in float32, or under bf16 autocast "
                             "(matrix products in bfloat16 with float32 accumulation; weights, "
                             "optimiser state, loss and evaluations in float32)")


def autocast(precision):
    """The context the head's training forward runs in."""
    if precision == "bf16":
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def loss_leaf(z):
    """A detached float32 copy of the head's output z that collects the loss's gradient."""
    return z.detach().float().requires_grad_()


def output_gradient(leaf, z):
    """The gradient collected on loss_leaf(z), in z's dtype (to back-propagate through z)."""
    return leaf.grad.to(z.dtype)
