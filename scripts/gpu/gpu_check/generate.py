"""selfspec generate as the generate checks run it: on a real trained model (stories260K, when the
kit carries one: pack.sh --model DIR) and a synthetic bf16 GQA model made on the machine, with prompts of token ids (no
tokenizer needed); each distinct run once (the checks share them)."""

import os

from .programs import last_json_line

GEN_TOKENS = 96
SYNTH_MODEL_ARGS = ["--layers", "4", "--hidden", "256", "--heads", "8", "--kv-heads", "2",
                    "--intermediate", "688", "--vocab", "2048", "--dtype", "bf16", "--seed", "7"]
SPEC_VARIANTS = [
    ("layer-skip chain", ["--spec", "layer-skip", "--skip-uniform", "0.2"]),
    ("layer-skip tree", ["--spec", "layer-skip", "--skip-uniform", "0.2", "--tree", "swift"]),
]


def gen_models(c, s):
    """[(label, model dir, extra args, prompt ids)] for the generate checks."""
    models = []
    stories = os.path.join(c.kit, "models", "stories260K")
    prompt = "1,403,407,365,471,296,260,289"
    if os.path.isfile(os.path.join(stories, "config.json")):
        models.append(("stories260K f32", stories, [], prompt))
        models.append(("stories260K as bf16", stories, ["--weights-dtype", "bf16"], prompt))
    else:
        s.note("the kit carries no stories260K: checked on the synthetic model only")
    synth = os.path.join(c.work, "models", "synthetic-gqa-bf16")
    if not os.path.isfile(os.path.join(synth, "config.json")):
        rc, _ = s.run([c.program("selfspec"), "make-model", "--out", synth] + SYNTH_MODEL_ARGS,
                      timeout=120)
        if rc != 0:
            s.fail(f"selfspec make-model exited with {rc}")
            return models
    models.append(("synthetic GQA bf16", synth, [], "1,5,900,17,1500,33"))
    return models


def generate(c, s, model, extra, prompt, device="cuda", graphs="on", spec=()):
    """selfspec generate's JSON result (greedy, GEN_TOKENS tokens), or None (the step failed)."""
    key = (model, tuple(extra), prompt, device, graphs, tuple(spec))
    if key in c.gen_cache:
        return c.gen_cache[key]
    args = [c.program("selfspec"), "generate", "--model", model, "--prompt-ids", prompt,
            "--max-new-tokens", str(GEN_TOKENS), "--ignore-eos", "--json", "--device", device]
    if device == "cuda":
        args += ["--cuda-graphs", graphs]
    else:
        args += ["--threads", str(len(os.sched_getaffinity(0)))]
    args += list(extra) + list(spec)
    rc, out = s.run(args, capture=True, timeout=120)
    result = last_json_line(out) if rc == 0 else None
    if result is None:
        s.fail(f"selfspec generate ({' '.join(spec) or 'autoregressive'}, device {device}, "
               f"graphs {graphs}) on {model} exited with {rc}")
    c.gen_cache[key] = result
    return result


def first_difference(a, b):
    """The first position where the token lists a and b differ, or None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
