#!/usr/bin/env python3
"""Independent reference for manual checks: greedy generation with HuggingFace transformers.

Loads a model directory (config.json + safetensors) with transformers' own model class
(LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM) in float64 and prints one JSON object
with the greedy continuation of --prompt-ids, and optionally the logits of the prompt's last
position. Not used by the test suite (which has its own C++ double-precision oracle); needs
`pip install torch transformers`.

    python3 scripts/dev/hf_reference.py --model DIR --prompt-ids 1 --max-new-tokens 64
"""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--logits", action="store_true", help="also print last-position logits")
    args = parser.parse_args()

    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
    model.eval()
    ids = torch.tensor([[int(x) for x in args.prompt_ids.split(",")]])
    generated = []
    first_logits = None
    with torch.no_grad():
        for _ in range(args.max_new_tokens):
            logits = model(ids).logits[0, -1]
            if first_logits is None:
                first_logits = logits
            token = int(torch.argmax(logits))
            generated.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    out = {"tokens": generated, "model_class": type(model).__name__, "dtype": args.dtype}
    if args.logits:
        out["first_logits"] = [float(x) for x in first_logits]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
