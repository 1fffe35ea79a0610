"""The generate checks on the GPU: CUDA graphs on == off, speculative greedy == autoregressive
(lossless), and GPU vs CPU greedy tokens (information only)."""

from .generate import SPEC_VARIANTS, first_difference, gen_models, generate


def step_cli_graphs(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        for spec_label, spec in [("autoregressive", [])] + SPEC_VARIANTS[:1]:
            on = generate(c, s, model, extra, prompt, graphs="on", spec=spec)
            off = generate(c, s, model, extra, prompt, graphs="off", spec=spec)
            if not on or not off:
                continue
            diff = first_difference(on["tokens"], off["tokens"])
            rows.append({"model": label, "mode": spec_label, "tokens": len(on["tokens"]),
                         "identical": diff is None,
                         "decode_tok_s_graphs_on": round(on["timings"]["decode_tokens_per_s"], 1),
                         "decode_tok_s_graphs_off": round(off["timings"]["decode_tokens_per_s"],
                                                          1)})
            if diff is not None:
                s.fail(f"{label}, {spec_label}: graphs on and off differ at token {diff}")
    s.figures["runs"] = rows


def step_cli_speculative(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        ar = generate(c, s, model, extra, prompt)
        if not ar:
            continue
        for spec_label, spec in SPEC_VARIANTS:
            sp = generate(c, s, model, extra, prompt, spec=spec)
            if not sp:
                continue
            diff = first_difference(ar["tokens"], sp["tokens"])
            rows.append({"model": label, "drafter": spec_label, "tokens": len(sp["tokens"]),
                         "lossless": diff is None, "drafted": sp.get("drafted"),
                         "acceptance_rate": round(sp.get("acceptance_rate", 0.0), 3),
                         "mean_accepted_length": round(sp.get("mean_accepted_length", 0.0), 2)})
            if diff is not None:
                s.fail(f"{label}, {spec_label}: speculative output differs from autoregressive "
                       f"at token {diff}")
            if not sp.get("drafted"):
                s.note(f"{label}, {spec_label}: nothing was drafted")
    s.figures["runs"] = rows


def step_cli_cpu_vs_gpu(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        gpu = generate(c, s, model, extra, prompt)
        cpu = generate(c, s, model, extra, prompt, device="cpu")
        if not gpu or not cpu:
            continue
        diff = first_difference(gpu["tokens"], cpu["tokens"])
        rows.append({"model": label, "tokens": len(gpu["tokens"]),
                     "agree": diff is None,
                     "first_difference": diff})
    s.figures["runs"] = rows
    s.note("informational: GPU and CPU reductions differ in order, so long greedy runs may part "
           "at a near tie (the logits are compared with tolerances in ctest_backend_vs_cpu)")
