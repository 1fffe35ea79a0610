#!/usr/bin/env python3
"""What SWIFT eq. 6 predicts for a model we cannot run here, from its geometry and a skip set.

    python3 scripts/dev/predict_speedup.py configs/models/llama-2-13b.yaml configs/skips/llama-2-13b.yaml
        [--alpha 0.8,0.85,0.9] [--max-draft 12] [--verify-ratio 1.0]

A decode step of a big model on a GPU is bound by the bytes of weights it reads, so a draft's cost
c is the share of weight bytes its plan still reads: per layer 4 h^2-ish attention bytes
(q, k, v, o projections with grouped-query K/V) and 3 h i MLP bytes, plus the LM head (V h); the
embedding reads one row. The expected speedup is max over the draft length g of
M(alpha, g) / (g c + v), M = (1 - alpha^(g+1)) / (1 - alpha) (src/search/expected_speedup.hpp;
v = 1 is eq. 6 as printed). alpha is an input: the acceptance the skip set reaches on the task,
which only running the model can measure.
"""

import argparse
import sys

import yaml


def weights(config):
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", h // heads)
    attention = h * heads * head_dim * 2 + h * kv * head_dim * 2  # q, o and k, v
    mlp = 3 * h * config["intermediate_size"]
    head = config["vocab_size"] * h
    return attention, mlp, head


def expected(alpha, c, max_draft, v):
    best = (0.0, 0)
    for g in range(1, max_draft + 1):
        m = g + 1 if alpha >= 1 else (1 - alpha ** (g + 1)) / (1 - alpha)
        best = max(best, (m / (g * c + v), g))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="architecture file (configs/models/*.yaml)")
    parser.add_argument("skips", help="skip-set file (configs/skips/*.yaml)")
    parser.add_argument("--alpha", default="0.8,0.85,0.9,0.95")
    parser.add_argument("--max-draft", type=int, default=12)
    parser.add_argument("--verify-ratio", type=float, default=1.0,
                        help="cost of a verification forward in decode forwards (1: eq. 6)")
    args = parser.parse_args()
    with open(args.model, encoding="utf-8") as f:
        config = yaml.safe_load(f)["config"]
    with open(args.skips, encoding="utf-8") as f:
        skips = yaml.safe_load(f)
    layers = config["num_hidden_layers"]
    if skips.get("num_layers", layers) != layers:
        sys.exit(f"{args.skips} is for {skips['num_layers']} layers, the model has {layers}")
    attention, mlp, head = weights(config)
    full = layers * (attention + mlp) + head
    draft = full - len(skips.get("attention") or []) * attention - len(skips.get("mlp") or []) * mlp
    c = draft / full
    print(f"{config.get('model_type')} {layers} layers: skips {len(skips.get('attention') or [])} "
          f"attention + {len(skips.get('mlp') or [])} MLP of {2 * layers} sublayers; "
          f"LM head {100 * head / full:.1f} % of the bytes; c = {c:.3f}")
    for alpha in (float(a) for a in args.alpha.split(",")):
        speedup, g = expected(alpha, c, args.max_draft, args.verify_ratio)
        print(f"  alpha {alpha:.2f}: expected speedup {speedup:.2f}x at draft length {g}")


if __name__ == "__main__":
    main()
