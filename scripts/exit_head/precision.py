"""Mixed-precision training for both draft-head trainers (--precision).

f32 runs every operation in float32. bf16 runs the head's forward under PyTorch's CPU autocast
with bfloat16 (its matrix products in bf16 with float32 accumulation; the weights, the
optimiser's state and the loss stay float32, the usual mixed-precision recipe of EAGLE's and most
LLM training). The loss reads a float32 copy of the head's output (loss_leaf), and the gradient
flows back in the output's own dtype (output_gradient). Evaluations always run in float32, so
held-out agreements compare across precisions.

On CPUs with AVX512_BF16 or AMX (Zen 4 and later, Sapphire Rapids and later) oneDNN multiplies
bf16 matrices several times faster than float32 ones; elsewhere bf16 is emulated and slower, and
a CPU flag is not proof that the instructions run (ggml's AMX path dies with SIGILL on one VM
whose cpuid lists AMX). So auto (what scripts/build-best-draft.sh passes) measures: a child process times the same matrix
product in both precisions (a crash there costs nothing but the choice), and bf16 is used only
when it is at least kAutoMinSpeedup times faster.
"""

import contextlib
import subprocess
import sys

import torch

kChoices = ("auto", "f32", "bf16")
kAutoMinSpeedup = 1.5  # bf16 must beat f32 by this much on the probe to be chosen
kProbeSeconds = 60  # the probe's time limit (it takes about a second)

# The probe: the best of 3 timings of a [512 x 1536] x [1536 x 4096] product per precision, on the
# trainer's thread count; prints "f32_seconds bf16_seconds".
_PROBE = """
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a, b = torch.randn(512, 1536), torch.randn(4096, 1536)
def best(x, y):
    x @ y.t()
    times = []
    for _ in range(3):
        start = time.perf_counter(); x @ y.t(); times.append(time.perf_counter() - start)
    return min(times)
print(best(a, b), best(a.bfloat16(), b.bfloat16()))
"""


def add_argument(parser):
    parser.add_argument("--precision", choices=kChoices, default="f32",
                        help="the head's forward and backward in float32, or under bf16 autocast "
                             "(matrix products in bfloat16 with float32 accumulation; weights, "
                             "optimiser state, loss and evaluations in float32); auto: bf16 where "
                             "a timed probe finds it at least 1.5x faster")


def resolve(choice, threads):
    """(precision, probe): the precision to train in, and for auto the probe's figures
    {"f32_s", "bf16_s", "speedup"} or {"error"} (None for an explicit choice)."""
    if choice != "auto":
        return choice, None
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, str(threads)], capture_output=True,
                              text=True, timeout=kProbeSeconds, check=False)
        f32_s, bf16_s = (float(v) for v in done.stdout.split())
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return "f32", {"error": f"the bf16 probe failed ({e}); training in f32"}
    speedup = f32_s / bf16_s if bf16_s > 0 else 0.0
    probe = {"f32_s": f32_s, "bf16_s": bf16_s, "speedup": speedup}
    return ("bf16" if speedup >= kAutoMinSpeedup else "f32"), probe


def settle(args, log):
    """Replaces args.precision by the precision to train in (resolve), sets args.precision_probe,
    and logs the choice when auto made it."""
    args.precision, args.precision_probe = resolve(args.precision, args.threads)
    if args.precision_probe is not None:
        log(describe(args.precision, args.precision_probe))


def describe(precision, probe):
    """One line for the log: the precision and, for auto, why."""
    if probe is None:
        return f"precision {precision}"
    if "error" in probe:
        return f"precision auto -> f32: {probe['error']}"
    return (f"precision auto -> {precision}: a bf16 matrix product ran {probe['speedup']:.2f}x "
            f"as fast as f32 (bf16 needs {kAutoMinSpeedup}x)")


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
