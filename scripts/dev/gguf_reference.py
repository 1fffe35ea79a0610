#!/usr/bin/env python3
"""Reference vectors for the real models, from an independent implementation (dev time only).

Loads a GGUF file with HF transformers' own GGUF loader (which dequantizes every tensor to float
with gguf-py and undoes llama.cpp's Q/K row permutation of `llama` models) into a float64 model,
and its tokenizer and chat template from the same file's metadata, then records:

  * prompts: for each prompt of the model's set (plain text, code, chat-templated), the exact text
    encoded (chat prompts: the `apply_chat_template(..., add_generation_prompt=True)` output),
    the prompt ids as HF encodes them (add_special_tokens=True, and whether that added anything),
    48 greedy new tokens from `generate(do_sample=False)` with end-of-sequence stopping turned off
    (`first_eos_index` says where the model first emitted an EOS id; tokens after it are what the
    model predicts past EOS), the top-1 minus top-2 logit margin of every generated step (a
    near-tie flags a step where a float32 engine may legitimately pick the other token), and the
    top-5 logits (ids, float64 values) and log-sum-exp of the first generated position, that is
    the logits after the full prompt. The logits come from one float64 forward pass over prompt +
    generated tokens (generate() rounds its logits to float32), whose argmax must reproduce every
    generated token, so the cached-decoding path and the plain forward agree.
  * tokenizer: ~45 strings with their ids without and with special tokens, and decode
    round-trips (skip_special_tokens=False, clean_up_tokenization_spaces=False).
  * provenance: versions, the command line, the GGUF's sha256 and metadata, the date.

The model is recognised by the file's sha256 (the table below; the same pins as
scripts/get-model.sh), which picks its prompt set and output name:
tests/data/realmodel/<model-name>.json. Never edit the output by hand; rerun this script.

Tokenizer caveat, corrected here: transformers' GGUF tokenizer builder ignores
`tokenizer.ggml.pre = "smollm"` (it keeps the plain GPT-2 byte-level split), while llama.cpp and
SmolLM2's own tokenizer.json split every digit off first (HF: Digits(individual_digits=True) before
ByteLevel; llama.cpp: the regex "\\p{N}" before the GPT-2 one). The two differ on whitespace runs
before a digit ("a  1"). This script installs the Digits pre-tokenizer for "smollm" files so the
recorded ids are the model's real tokenization; wherever the uncorrected transformers tokenizer
disagrees, its ids are recorded too (`hf_as_loaded_*`).

Usage (2 threads; the 1.5B model needs about 13 GB of RAM in float64):
    python3 scripts/dev/gguf_reference.py "$(scripts/get-model.sh smollm2-135m-instruct)" \
        [--out-dir tests/data/realmodel] [--max-new-tokens 48] [--threads 2]
Needs `pip install torch transformers gguf`.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import sys
import time

import gguf
import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer

# --- Models and prompt sets -----------------------------------------------------------------------

SMOLLM2_PROMPTS = [
    {"name": "text-capital", "kind": "text", "text": "The capital of France is"},
    {
        "name": "text-story",
        "kind": "text",
        "text": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    },
    {
        "name": "text-numbers",
        "kind": "text",
        "text": "Question: A shop sells 12 apples for 3 dollars. How much do 30 apples cost?\nAnswer:",
    },
    {
        "name": "text-recipe",
        "kind": "text",
        "text": "Here is a simple recipe for pancakes.\n\nIngredients:\n",
    },
    {
        "name": "code-python",
        "kind": "code",
        "text": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    },
    {"name": "code-c", "kind": "code", "text": "#include <stdio.h>\n\nint main(void) {\n"},
    {
        "name": "chat-capital",
        "kind": "chat",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    },
    {
        "name": "chat-explain",
        "kind": "chat",
        "messages": [{"role": "user", "content": "Explain in a few sentences what a hash table is."}],
    },
    {
        "name": "chat-tips",
        "kind": "chat",
        "messages": [
            {"role": "user", "content": "Give me five tips for staying productive when working from home."}
        ],
    },
    {
        "name": "chat-system-poem",
        "kind": "chat",
        "messages": [
            {"role": "system", "content": "You are a poet who writes short, vivid poems."},
            {"role": "user", "content": "Write a poem about the ocean at night."},
        ],
    },
]

CODER_PROMPTS = [
    {
        "name": "code-is-prime",
        "kind": "code",
        "text": 'def is_prime(n: int) -> bool:\n    """Return True if n is a prime number."""\n',
    },
    {
        "name": "code-closest-pair",
        "kind": "code",
        "text": (
            "from typing import List\n\n\n"
            "def closest_pair(values: List[float]) -> float:\n"
            '    """Return the smallest absolute difference between two distinct elements.\n'
            "    >>> closest_pair([1.0, 5.0, 3.5, 9.0])\n"
            "    1.5\n"
            '    """\n'
        ),
    },
    {
        "name": "code-cpp",
        "kind": "code",
        "text": (
            "#include <vector>\n\n"
            "// Returns the sum of the elements of v.\n"
            "int sum(const std::vector<int>& v) {\n"
        ),
    },
    {"name": "text-fox", "kind": "text", "text": "The quick brown fox jumps over the lazy dog. The"},
    {
        "name": "chat-reverse",
        "kind": "chat",
        "messages": [{"role": "user", "content": "Write a Python function that reverses a string."}],
    },
    {
        "name": "chat-system-sql",
        "kind": "chat",
        "messages": [
            {"role": "system", "content": "You are a concise SQL expert."},
            {
                "role": "user",
                "content": "Write a query that returns the 5 most recent orders from a table orders(id, created_at).",
            },
        ],
    },
]

# name -> (sha256 of the GGUF, prompt set); the pins are those of scripts/get-model.sh.
MODELS = {
    "smollm2-135m-instruct": (
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        SMOLLM2_PROMPTS,
    ),
    "qwen2.5-coder-0.5b-instruct": (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        CODER_PROMPTS,
    ),
    "qwen2.5-coder-1.5b-instruct": (
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        CODER_PROMPTS,
    ),
}

# Strings for the tokenizer section, shared by every model (special tokens of one model are plain
# text to another, which is worth checking too).
TOKENIZER_STRINGS = [
    "",
    " ",
    "Hello world",
    "Hello, world!",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "don't",
    "I'm sure they'll say we've DON'T",
    "12345",
    "3.14159",
    "1,000,000 and 2024-01-31",
    "a  1",
    "x =  42;   y = 7",
    "\n",
    "\n\n\n",
    "line1\nline2\r\nline3",
    "  \n  \n",
    "\tindented\twith\ttabs",
    "def f(x):\n\treturn x + 1\n",
    "    four spaces\n        eight spaces",
    "for (int i = 0; i < n; ++i) {\n    sum += a[i];\n}",
    "MixedCASE CamelCaseWords snake_case_words",
    "https://example.com/path?q=1&r=2#frag",
    "naïve café résumé",
    "Ünïcödé ß ﬁ ligature",
    "日本語のテキスト",
    "你好，世界！",
    "한국어 문장",
    "Привет, мир",
    "مرحبا بالعالم",
    "math ∑ ∫ √ ≤ ≥ π",
    "emoji 😀👍🏽",
    "family 👨‍👩‍👧",
    "\u00a0non-breaking space",
    "zero\u200bwidth",
    "A" * 40,
    "<|im_start|>",
    "<|im_start|>user\nhi<|im_end|>\n",
    "text<|im_end|>more",
    "<|endoftext|>",
    "<|im_start",
    "<file_sep>",
    "<|fim_prefix|>def<|fim_suffix|>\n<|fim_middle|>",
    "<s> </s> <unk>",
]

# --- Helpers ---------------------------------------------------------------------------------------


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def identify(sha):
    for name, (pinned, prompts) in MODELS.items():
        if pinned == sha:
            return name, prompts
    known = ", ".join(MODELS)
    sys.exit(f"gguf_reference: no model with sha256 {sha}; known: {known} (see scripts/get-model.sh)")


def gguf_metadata(path):
    """The scalar and string metadata of the file (arrays only by length), via gguf-py."""
    reader = gguf.GGUFReader(path)
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if field.types and field.types[0] == gguf.GGUFValueType.ARRAY and len(field.data) > 16:
            out[key] = f"<array of {len(field.data)}>"
            continue
        value = field.contents()
        out[key] = value.item() if isinstance(value, np.generic) else value
    types = {}
    for tensor in reader.tensors:
        types[tensor.tensor_type.name] = types.get(tensor.tensor_type.name, 0) + 1
    out["<tensor types>"] = types
    out["<has output.weight>"] = any(t.name == "output.weight" for t in reader.tensors)
    return out


def load_tokenizer(path, pre_type):
    """transformers' tokenizer built from the GGUF, and the same with the "smollm" split fixed."""
    directory, filename = os.path.split(os.path.abspath(path))
    as_loaded = AutoTokenizer.from_pretrained(directory, gguf_file=filename)
    fixed = AutoTokenizer.from_pretrained(directory, gguf_file=filename)
    if pre_type == "smollm":
        fixed.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
            ]
        )
    return fixed, as_loaded


def load_model(path, threads):
    """The float64 model. Loaded in float32 (gguf-py dequantizes to float32, so no value changes)
    and then widened, which keeps the peak memory at about one float64 copy."""
    torch.set_num_threads(threads)
    directory, filename = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=filename, dtype=torch.float32, attn_implementation="eager"
    )
    model = model.to(torch.float64)
    model.eval()
    # Generate the full length: no stopping at an end-of-sequence id.
    model.generation_config.eos_token_id = None
    return model


def encode(tokenizer, text, add_special):
    return tokenizer.encode(text, add_special_tokens=add_special)


def decode(tokenizer, ids, skip_special=False):
    return tokenizer.decode(ids, skip_special_tokens=skip_special, clean_up_tokenization_spaces=False)


def eos_ids(tokenizer, model):
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    config_eos = model.config.eos_token_id
    if config_eos is not None:
        ids.update(config_eos if isinstance(config_eos, list) else [config_eos])
    return sorted(ids)


# --- Prompts -------------------------------------------------------------------------------------


def prompt_text(tokenizer, prompt):
    if prompt["kind"] != "chat":
        return prompt["text"]
    return tokenizer.apply_chat_template(prompt["messages"], add_generation_prompt=True, tokenize=False)


@torch.no_grad()
def greedy(model, prompt_ids, max_new_tokens, pad_id):
    """The greedy continuation from generate(). Its logits are not used: generate() rounds them to
    float32 before the argmax, so the float64 logits come from teacher_forced_logits()."""
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        eos_token_id=None,
        pad_token_id=pad_id,
    )
    return out[0, len(prompt_ids) :].tolist()


@torch.no_grad()
def teacher_forced_logits(model, prompt_ids, tokens):
    """float64 logits after the prompt and after each generated token but the last (the positions
    that predicted the generated tokens), from one forward pass over prompt + tokens."""
    ids = torch.tensor([prompt_ids + tokens[:-1]], dtype=torch.long)
    return model(ids).logits[0, len(prompt_ids) - 1 :].to(torch.float64)


def top_k(logits, k):
    values, ids = torch.topk(logits, k)
    return {"ids": ids.tolist(), "logits": [float(v) for v in values]}


def margin(logits):
    values = torch.topk(logits, 2).values
    return float(values[0] - values[1])


def run_prompt(model, tokenizer, as_loaded, prompt, max_new_tokens, eos, pad_id):
    text = prompt_text(tokenizer, prompt)
    ids = encode(tokenizer, text, True)
    ids_plain = encode(tokenizer, text, False)
    print(f"  {prompt['name']}: {len(ids)} prompt tokens", file=sys.stderr, flush=True)
    started = time.monotonic()
    tokens = greedy(model, ids, max_new_tokens, pad_id)
    generated = time.monotonic()
    logits = teacher_forced_logits(model, ids, tokens)
    forced = logits.argmax(dim=-1).tolist()
    if forced != tokens:
        sys.exit(
            f"gguf_reference: {prompt['name']}: generate() {tokens} and a teacher-forced forward {forced} disagree"
        )
    print(
        f"    generate {generated - started:.1f} s, forward {time.monotonic() - generated:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    first_eos = next((i for i, t in enumerate(tokens) if t in eos), None)
    record = {"name": prompt["name"], "kind": prompt["kind"]}
    if prompt["kind"] == "chat":
        record["messages"] = prompt["messages"]
        template_ids = tokenizer.apply_chat_template(
            prompt["messages"], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        record["apply_chat_template_ids_equal"] = list(template_ids) == ids
    record.update(
        {
            "text": text,
            "prompt_ids": ids,
            "special_tokens_added": ids != ids_plain,
            "greedy_ids": tokens,
            "greedy_text": decode(tokenizer, tokens),
            "greedy_text_until_eos": (
                decode(tokenizer, tokens[: first_eos + 1]) if first_eos is not None else None
            ),
            "first_eos_index": first_eos,
            "step_margins": [round(margin(step), 6) for step in logits],
            "teacher_forced_check": "ok: argmax of one forward pass over prompt + greedy_ids[:-1] == greedy_ids",
            "first_top5": top_k(logits[0], 5),
            "first_logsumexp": float(torch.logsumexp(logits[0], dim=-1)),
        }
    )
    loaded_ids = encode(as_loaded, text, True)
    if loaded_ids != ids:
        record["hf_as_loaded_prompt_ids"] = loaded_ids
    return record


# --- Tokenizer section -----------------------------------------------------------------------------


def tokenizer_case(tokenizer, as_loaded, text):
    without = encode(tokenizer, text, False)
    with_special = encode(tokenizer, text, True)
    decoded = decode(tokenizer, without)
    case = {
        "text": text,
        "ids_without_special": without,
        "ids_with_special": with_special,
        "tokens": tokenizer.convert_ids_to_tokens(without),
        "decoded": decoded,
        "roundtrip": decoded == text,
    }
    loaded_without = encode(as_loaded, text, False)
    loaded_with = encode(as_loaded, text, True)
    if loaded_without != without:
        case["hf_as_loaded_ids_without_special"] = loaded_without
    if loaded_with != with_special:
        case["hf_as_loaded_ids_with_special"] = loaded_with
    return case


def tokenizer_section(tokenizer, as_loaded, model):
    return {
        "class": type(tokenizer).__name__,
        "pre_tokenizer": str(tokenizer.backend_tokenizer.pre_tokenizer),
        "hf_as_loaded_pre_tokenizer": str(as_loaded.backend_tokenizer.pre_tokenizer),
        "bos_token": [tokenizer.bos_token, tokenizer.bos_token_id],
        "eos_token": [tokenizer.eos_token, tokenizer.eos_token_id],
        "pad_token": [tokenizer.pad_token, tokenizer.pad_token_id],
        "unk_token": [tokenizer.unk_token, tokenizer.unk_token_id],
        "eos_ids": eos_ids(tokenizer, model),
        "special_tokens": sorted(tokenizer.all_special_tokens),
        "special_tokens_in_text": "parsed as the special token (HF default, split_special_tokens=False)",
        "vocab_size": len(tokenizer),
        "cases": [tokenizer_case(tokenizer, as_loaded, text) for text in TOKENIZER_STRINGS],
    }


# --- Output --------------------------------------------------------------------------------------


def compact_json(value, indent=0):
    """JSON with lists of scalars on one line (ids and logits stay readable in a diff)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}  {json.dumps(k)}: {compact_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{pad}  {compact_json(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def provenance(args, path, sha, started):
    return {
        "generator": "scripts/dev/gguf_reference.py",
        "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable)] + sys.argv),
        "gguf_file": os.path.basename(path),
        "gguf_sha256": sha,
        "date_utc": started,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "gguf": getattr(gguf, "__version__", None) or package_version("gguf"),
            "numpy": np.__version__,
        },
        "dtype": "float64 (weights dequantized by gguf-py to float32, then widened)",
        "attention": "eager",
        "threads": args.threads,
        "generation": (
            f"model.generate(do_sample=False, max_new_tokens={args.max_new_tokens}, eos_token_id=None); "
            "no stop at EOS"
        ),
    }


def hf_config(model):
    """The scalar fields of the configuration transformers derived from the file (less the load
    dtype, the path and the version, which the provenance records)."""
    skip = {"dtype", "torch_dtype", "_name_or_path", "transformers_version"}
    return {
        key: value
        for key, value in model.config.to_dict().items()
        if key not in skip
        and (isinstance(value, (int, float, str, bool, type(None))) or key.startswith("rope"))
    }


def package_version(name):
    from importlib.metadata import version

    return version(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", nargs="+", help="GGUF files (from scripts/get-model.sh)")
    parser.add_argument("--out-dir", default="tests/data/realmodel")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    for path in args.gguf:
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        sha = sha256_of(path)
        name, prompts = identify(sha)
        print(f"gguf_reference: {name} ({path})", file=sys.stderr, flush=True)
        metadata = gguf_metadata(path)
        pre_type = metadata.get("tokenizer.ggml.pre")
        tokenizer, as_loaded = load_tokenizer(path, pre_type)
        model = load_model(path, args.threads)
        eos = eos_ids(tokenizer, model)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
        result = {
            "model": name,
            "provenance": provenance(args, path, sha, started),
            "gguf_metadata": metadata,
            "hf_config": hf_config(model),
            "tokenizer": tokenizer_section(tokenizer, as_loaded, model),
            "prompts": [
                run_prompt(model, tokenizer, as_loaded, p, args.max_new_tokens, set(eos), pad_id)
                for p in prompts
            ],
        }
        os.makedirs(args.out_dir, exist_ok=True)
        out = os.path.join(args.out_dir, f"{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            f.write(compact_json(result) + "\n")
        print(f"gguf_reference: wrote {out}", file=sys.stderr, flush=True)
        del model


if __name__ == "__main__":
    main()
