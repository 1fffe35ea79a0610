#!/usr/bin/env python3
"""Writes the seed corpus of the parser fuzz targets: tests/fuzz/corpus/<target>/.

Small valid files that reach every supported feature of each parser, and a few invalid ones
that stop at its different checks. Standard library only, except the SentencePiece models,
which Debian's spm_train trains on a text this script writes (package "sentencepiece").
Re-running rewrites the corpus of the targets named (all by default); the SentencePiece models
differ from run to run, the other seeds are byte-identical.

    python3 tests/fuzz/make_seeds.py [TARGET...]
"""

import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"

TEXT = """The quick brown fox jumps over the lazy dog. It's 2024, isn't it?
def add(a, b):\n    return a + b  # 3.14 + 2.71
Grüße aus München! 東京タワー 🚀 <s> hello</s> world <|endoftext|>
    indented   spaces\tand\ttabs\r\nnew lines 1234567890 x=1;y=2;
"""


def write(target, name, data):
    path = CORPUS / target / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def dump(value):
    return json.dumps(value, ensure_ascii=False, indent=1)


# ---------------------------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, JSON header, data area.
# ---------------------------------------------------------------------------------------------
def safetensors(header, data=b"", pad=True, header_len=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:  # the reference writer pads the header with spaces to a multiple of 8
        text += b" " * (-len(text) % 8)
    length = len(text) if header_len is None else header_len
    return struct.pack("<Q", length) + text + data


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def safetensors_seeds():
    f32 = struct.pack("<6f", 1.0, -2.0, 0.5, 3.25, -0.0, 1e-3)
    write("safetensors", "empty.safetensors", safetensors({}))
    write("safetensors", "one_f32.safetensors",
          safetensors({"w": tensor("F32", [2, 3], 0, 24)}, f32))
    mixed = {
        "__metadata__": {"format": "pt", "note": "fuzz seed"},
        "model.embed_tokens.weight": tensor("BF16", [4, 2], 0, 16),
        "model.norm.weight": tensor("F16", [2], 16, 20),
        "lm_head.weight": tensor("F32", [2, 2], 20, 36),
        "empty": tensor("F32", [0, 5], 36, 36),
        "scalar": tensor("F32", [], 36, 40),
    }
    write("safetensors", "mixed_dtypes.safetensors",
          safetensors(mixed, bytes(range(40)), pad=True))
    write("safetensors", "unpadded_header.safetensors",
          safetensors({"b": tensor("F16", [3], 0, 6)}, b"\x00\x3c\x00\x40\x00\xc0", pad=False))
    # Invalid: each stops at a different check.
    write("safetensors", "bad_truncated.safetensors",
          safetensors({"w": tensor("F32", [2, 3], 0, 24)}, f32[:10]))
    write("safetensors", "bad_header_length.safetensors",
          safetensors({"w": tensor("F32", [1], 0, 4)}, f32[:4], header_len=1 << 40))
    write("safetensors", "bad_overlap.safetensors",
          safetensors({"a": tensor("F32", [2], 0, 8), "b": tensor("F32", [2], 4, 12)}, f32[:12]))
    write("safetensors", "bad_dtype.safetensors", safetensors({"w": tensor("I64", [1], 0, 8)},
                                                              bytes(8)))
    write("safetensors", "bad_duplicate.safetensors",
          struct.pack("<Q", 96) + b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
          b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' + bytes(4))


# ---------------------------------------------------------------------------------------------
# GGUF (v3 layout; gguf.md): header, metadata, tensor infos, padding to the alignment, data.
# ---------------------------------------------------------------------------------------------
GGUF_VALUE_TYPES = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"),
                    "u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"),
                    "str": (8, None), "arr": (9, None), "u64": (10, "<Q"), "i64": (11, "<q"),
                    "f64": (12, "<d")}
# ggml type id, elements per block, bytes per block.
GGML_TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
              "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
              "BF16": (30, 1, 2)}


def gguf_string(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    """(type id, encoding) of a metadata value: kind is a scalar type, "str" or ("arr", kind)."""
    if isinstance(kind, tuple):
        element = kind[1]
        items = b"".join(gguf_value(element, v)[1] for v in value)
        return 9, struct.pack("<IQ", GGUF_VALUE_TYPES[element][0], len(value)) + items
    type_id, fmt = GGUF_VALUE_TYPES[kind]
    return type_id, gguf_string(value) if kind == "str" else struct.pack(fmt, value)


def gguf(metadata, tensors, alignment=32, version=3):
    """metadata: [(key, kind, value)]; tensors: [(name, ggml type name or raw id, dims, data
    bytes[, data offset instead of the next free one])]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, value in metadata:
        type_id, encoded = gguf_value(kind, value)
        out += gguf_string(key) + struct.pack("<I", type_id) + encoded
    offset = 0
    data = b""
    for name, ggml_type, dims, payload, *at in tensors:
        type_id = GGML_TYPES[ggml_type][0] if isinstance(ggml_type, str) else ggml_type
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", type_id, at[0] if at else offset)
        padded = payload + bytes(-len(payload) % alignment)
        data += padded
        offset += len(padded)
    return out + bytes(-len(out) % alignment) + data


def ggml_bytes(rng, ggml_type, dims):
    _, block, block_bytes = GGML_TYPES[ggml_type]
    rows = 1
    for d in dims[1:]:
        rows *= d
    count = rows * dims[0] // block * block_bytes
    if ggml_type == "F32":  # finite values
        return b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(count // 4))
    data = bytearray(rng.getrandbits(8) for _ in range(count))
    if ggml_type == "F16":  # keep the exponents finite
        for i in range(1, count, 2):
            data[i] &= 0x3B
    return bytes(data)


def tiny_model(arch, types, tied=False, bias=False, alignment=32):
    """A one-layer model of `arch` (hidden 32, 2 heads of 16, 1 KV head, FFN 256, vocab 32) with
    random weights; types maps a tensor name to its ggml type (default F32). GGUF dims are HF
    shapes reversed; the tokenizer metadata is llama.cpp's (gpt2 BPE)."""
    rng = random.Random(arch + str(sorted(types.items())))
    hidden, ffn, vocab, head_dim, kv = 32, 256, 32, 16, 1
    shapes = {"token_embd.weight": [vocab, hidden], "output_norm.weight": [hidden],
              "blk.0.attn_norm.weight": [hidden], "blk.0.ffn_norm.weight": [hidden],
              "blk.0.attn_q.weight": [hidden, hidden],
              "blk.0.attn_k.weight": [kv * head_dim, hidden],
              "blk.0.attn_v.weight": [kv * head_dim, hidden],
              "blk.0.attn_output.weight": [hidden, hidden],
              "blk.0.ffn_gate.weight": [ffn, hidden], "blk.0.ffn_up.weight": [ffn, hidden],
              "blk.0.ffn_down.weight": [hidden, ffn]}
    if not tied:
        shapes["output.weight"] = [vocab, hidden]
    if bias:
        shapes.update({"blk.0.attn_q.bias": [hidden], "blk.0.attn_k.bias": [kv * head_dim],
                       "blk.0.attn_v.bias": [kv * head_dim]})
    tensors = []
    for name, shape in shapes.items():
        ggml_type = types.get(name, "F32")
        dims = shape[::-1]
        tensors.append((name, ggml_type, dims, ggml_bytes(rng, ggml_type, dims)))
    tokens = ["<s>", "</s>"] + [chr(ord("a") + i) for i in range(26)] + ["\u0120", "ab", "cd",
                                                                          "abcd"]
    metadata = [
        ("general.architecture", "str", arch), ("general.name", "str", f"tiny {arch}"),
        ("general.alignment", "u32", alignment),
        (f"{arch}.block_count", "u32", 1), (f"{arch}.context_length", "u32", 64),
        (f"{arch}.embedding_length", "u32", hidden), (f"{arch}.feed_forward_length", "u32", ffn),
        (f"{arch}.attention.head_count", "u32", 2), (f"{arch}.attention.head_count_kv", "u32", kv),
        (f"{arch}.attention.layer_norm_rms_epsilon", "f32", 1e-5),
        (f"{arch}.rope.freq_base", "f32", 10000.0),
        (f"{arch}.rope.dimension_count", "u32", head_dim),
        ("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "smollm"),
        ("tokenizer.ggml.tokens", ("arr", "str"), tokens),
        ("tokenizer.ggml.token_type", ("arr", "i32"), [3, 3] + [1] * (len(tokens) - 2)),
        ("tokenizer.ggml.merges", ("arr", "str"), ["a b", "c d", "ab cd"]),
        ("tokenizer.ggml.bos_token_id", "u32", 0), ("tokenizer.ggml.eos_token_id", "u32", 1),
        ("tokenizer.ggml.add_bos_token", "bool", True),
        ("tokenizer.chat_template", "str", "{% for m in messages %}{{ m['content'] }}{% endfor %}"),
    ]
    return gguf(metadata, tensors, alignment)


def gguf_seeds():
    llama = tiny_model("llama", {"token_embd.weight": "F16", "blk.0.attn_q.weight": "Q8_0",
                                 "blk.0.attn_k.weight": "Q4_0", "blk.0.attn_v.weight": "Q4_1",
                                 "blk.0.attn_output.weight": "BF16",
                                 "blk.0.ffn_gate.weight": "Q4_0", "blk.0.ffn_up.weight": "Q4_1",
                                 "blk.0.ffn_down.weight": "Q4_K", "output.weight": "Q8_0"})
    write("gguf", "llama_quantized.gguf", llama)
    write("gguf", "qwen2_tied_bias.gguf",
          tiny_model("qwen2", {"token_embd.weight": "Q8_0", "blk.0.attn_q.weight": "BF16",
                               "blk.0.attn_output.weight": "F16",
                               "blk.0.ffn_gate.weight": "Q4_1", "blk.0.ffn_up.weight": "Q8_0",
                               "blk.0.ffn_down.weight": "Q6_K"},
                     tied=True, bias=True, alignment=64))
    every_type = [(f"test.{kind}", kind, value) for kind, value in
                  [("u8", 200), ("i8", -100), ("u16", 60000), ("i16", -30000), ("u32", 1 << 31),
                   ("i32", -(1 << 30)), ("u64", 1 << 40), ("i64", -(1 << 40)), ("f32", 0.5),
                   ("f64", -2.25), ("bool", False), ("str", "text")]]
    every_type += [(f"test.array_{kind}", ("arr", kind), values) for kind, values in
                   [("u8", [1, 2]), ("i16", [-1, 7]), ("u64", [5]), ("f32", [1.5, -0.5]),
                    ("f64", []), ("bool", [True, False]), ("str", ["x", "", "yz"])]]
    write("gguf", "metadata_every_type_v2.gguf", gguf(every_type, [], version=2))
    # Invalid: each stops at a different check.
    write("gguf", "bad_magic.gguf", b"GGUX" + llama[4:200])
    write("gguf", "bad_version.gguf", llama[:4] + struct.pack("<I", 1) + llama[8:200])
    write("gguf", "bad_tensor_count.gguf", llama[:8] + struct.pack("<Q", 1 << 40) + llama[16:200])
    write("gguf", "bad_truncated.gguf", llama[:-100])
    one = [("general.architecture", "str", "llama")]
    write("gguf", "bad_unknown_type.gguf", gguf(one, [("w", 6, [32], bytes(22))]))  # Q5_0
    write("gguf", "bad_block_dims.gguf", gguf(one, [("w", "Q8_0", [30], bytes(34))]))
    write("gguf", "bad_overlap.gguf",
          gguf(one, [("a", "F32", [8], bytes(32)), ("b", "F32", [8], bytes(32), 0)]))
    write("gguf", "bad_alignment.gguf",
          gguf(one + [("general.alignment", "u32", 24)], [("w", "F32", [4], bytes(16))]))


# ---------------------------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------------------------
LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
    "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16",
}


def model_config_seeds():
    write("model_config", "llama2_7b.json", dump(LLAMA2_7B))
    llama31 = dict(LLAMA2_7B, hidden_size=4096, intermediate_size=14336, num_key_value_heads=8,
                   vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                   bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
                   torch_dtype="bfloat16",
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192})
    write("model_config", "llama31_8b.json", dump(llama31))
    write("model_config", "codellama_linear.json",
          dump(dict(LLAMA2_7B, rope_theta=1e6, max_position_embeddings=16384, vocab_size=32016,
                    rope_scaling={"type": "linear", "factor": 2.0})))
    write("model_config", "mistral.json",
          dump({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "vocab_size": 32768, "max_position_embeddings": 32768, "sliding_window": None,
                "rope_theta": 1e6, "head_dim": 128, "dtype": "bfloat16"}))
    write("model_config", "qwen2.json",
          dump({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
                "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
                "vocab_size": 151936, "max_position_embeddings": 32768, "sliding_window": 32768,
                "use_sliding_window": False, "tie_word_embeddings": True,
                "rms_norm_eps": 1e-6, "bos_token_id": 151643, "eos_token_id": 151645}))
    write("model_config", "tiny.json",
          dump({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
                "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10}))
    # Invalid: each stops at a different check.
    write("model_config", "bad_missing_key.json",
          dump({k: v for k, v in LLAMA2_7B.items() if k != "hidden_size"}))
    write("model_config", "bad_type.json", dump(dict(LLAMA2_7B, num_hidden_layers="32")))
    write("model_config", "bad_sliding_window.json",
          dump({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                "max_position_embeddings": 32768, "sliding_window": 4096}))
    write("model_config", "bad_rope_type.json",
          dump(dict(LLAMA2_7B, rope_scaling={"rope_type": "yarn", "factor": 4.0})))
    write("model_config", "bad_eos.json", dump(dict(LLAMA2_7B, eos_token_id=[2, 32000])))


# ---------------------------------------------------------------------------------------------
# tokenizer.json (byte-level BPE). A target input may carry "\0" + a text to encode.
# ---------------------------------------------------------------------------------------------
def gpt2_byte_chars():
    """GPT-2's byte -> printable character table (bytes that are printable map to themselves)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {}
    extra = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def learn_merges(words, count):
    """A small greedy BPE over byte-level words: the `count` most frequent pairs, in order."""
    pieces = [list(w) for w in words]
    merges = []
    for _ in range(count):
        pairs = Counter()
        for p in pieces:
            pairs.update(zip(p, p[1:]))
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda item: (item[1], item[0]))
        merges.append((a, b))
        for p in pieces:
            i = 0
            while i + 1 < len(p):
                if p[i] == a and p[i + 1] == b:
                    p[i:i + 2] = [a + b]
                i += 1
    return merges


def added(id_, content, special=True, **flags):
    token = {"id": id_, "content": content, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": not special, "special": special}
    token.update(flags)
    return token


def template(bos, bos_id):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_tokenizer(pre_tokenizer, merge_count=80, pairs=False):
    table = gpt2_byte_chars()
    words = ["".join(table[b] for b in (" " + w).encode()) for w in TEXT.split()]
    merges = learn_merges(words, merge_count)
    vocab = {table[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    added_tokens = [added(len(vocab) + i, s) for i, s in enumerate(specials)]
    post = template("<|begin_of_text|>", added_tokens[0]["id"])
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
        "normalizer": None, "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True}, post]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab,
                  "merges": [[a, b] for a, b in merges] if pairs else
                            [f"{a} {b}" for a, b in merges]},
    }


def char_tokenizer(pre_tokenizer, **model):
    """Raw characters (no byte-level mapping), decoder null: tokens joined by spaces."""
    vocab = {c: i for i, c in enumerate(["<unk>", "a", "b", "-", "1", "2", "3", "a-", "-b",
                                         "12", "<0x41>", "<0xC3>", "<0xBC>", " ", "x"])}
    base = {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
            "byte_fallback": False, "vocab": vocab, "merges": ["a -", "- b", "1 2"]}
    base.update(model)
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
            "model": base}


def bpe_tokenizer_seeds():
    llama3 = byte_level_tokenizer({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]})
    write("bpe_tokenizer", "llama3_style.json", dump(llama3))
    write("bpe_tokenizer", "llama3_style_with_text.json",
          dump(llama3) + "\0" + "Hello <|eot_id|> wörld 12345 \U0001F680\n\n  x")
    gpt2 = byte_level_tokenizer({"type": "ByteLevel", "add_prefix_space": True,
                                 "trim_offsets": True, "use_regex": True}, pairs=True)
    gpt2["model"]["ignore_merges"] = True
    gpt2["added_tokens"].append(added(gpt2["added_tokens"][-1]["id"] + 1, "hello",
                                      special=False, single_word=True, lstrip=True, rstrip=True))
    gpt2["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|end_of_text|>", 257],
                              "cls": ["<|begin_of_text|>", 256], "trim_offsets": True,
                              "add_prefix_space": True}
    write("bpe_tokenizer", "gpt2_style_pairs.json", dump(gpt2))
    digits = byte_level_tokenizer({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}]}, merge_count=20)
    digits["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]}
    write("bpe_tokenizer", "digits_bert.json", dump(digits))
    for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                     "Contiguous"]:
        split = {"type": "Split", "pattern": {"String": "-"}, "behavior": behavior,
                 "invert": behavior == "Contiguous"}
        write("bpe_tokenizer", f"split_{behavior.lower()}.json",
              dump(char_tokenizer(split)) + "\0a-b--ab-12-3")
    write("bpe_tokenizer", "byte_fallback_unk.json",
          dump(char_tokenizer({"type": "Digits", "individual_digits": False},
                              byte_fallback=True, unk_token="<unk>", fuse_unk=True))
          + "\0Ab-zz\u00fc12")
    # Invalid: each stops at a different check.
    bad = char_tokenizer(None)
    write("bpe_tokenizer", "bad_model_type.json",
          dump(dict(bad, model=dict(bad["model"], type="WordPiece"))))
    write("bpe_tokenizer", "bad_normalizer.json", dump(dict(bad, normalizer={"type": "NFC"})))
    write("bpe_tokenizer", "bad_merge.json",
          dump(dict(bad, model=dict(bad["model"], merges=["a z"]))))
    write("bpe_tokenizer", "bad_regex.json",
          dump(char_tokenizer({"type": "Split", "pattern": {"Regex": "(a"},
                               "behavior": "Isolated"})))
    write("bpe_tokenizer", "bad_truncated.json", dump(llama3)[:500])


# ---------------------------------------------------------------------------------------------
# GGUF tokenizers: tokenizer-only files (no tensors) with llama.cpp's tokenizer.ggml.* keys.
# ---------------------------------------------------------------------------------------------
TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "tokenizer" / "chat_templates"


def gguf_tokenizer_file(model, tokens, types, extra):
    metadata = [("general.architecture", "str", "llama"), ("tokenizer.ggml.model", "str", model),
                ("tokenizer.ggml.tokens", ("arr", "str"), tokens),
                ("tokenizer.ggml.token_type", ("arr", "i32"), types)]
    return gguf(metadata + extra, [])


def gpt2_vocab(pre, template):
    """The byte-level seed tokenizer's vocabulary as GGUF metadata (gpt2 model)."""
    tokenizer = byte_level_tokenizer(None)
    vocab = tokenizer["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get) + [t["content"] for t in tokenizer["added_tokens"]]
    types = [1] * len(vocab) + [3] * len(tokenizer["added_tokens"])
    extra = [("tokenizer.ggml.pre", "str", pre),
             ("tokenizer.ggml.merges", ("arr", "str"), tokenizer["model"]["merges"]),
             ("tokenizer.ggml.bos_token_id", "u32", len(vocab)),
             ("tokenizer.ggml.eos_token_id", "u32", len(vocab) + 1),
             ("tokenizer.ggml.eot_token_id", "u32", len(vocab) + 2),
             ("tokenizer.chat_template", "str", (TEMPLATES / template).read_text())]
    return gguf_tokenizer_file("gpt2", tokens, types, extra)


def llama_vocab(byte_tokens=True, template="llama2.jinja"):
    """A SentencePiece-style vocabulary (scores, byte tokens) as GGUF metadata (llama model)."""
    words = ["\u2581" + w for w in TEXT.split()]
    pieces = []
    for a, b in learn_merges(words, 60):
        if a + b not in pieces:
            pieces.append(a + b)
    chars = sorted({c for w in words for c in w})
    tokens = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]
    if byte_tokens:
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        types += [6] * 256
    tokens += chars + pieces + ["<tool>"]
    types += [1] * (len(chars) + len(pieces)) + [4]
    scores = [0.0] * (len(tokens) - len(chars) - len(pieces) - 1)
    scores += [-1000.0 - i for i in range(len(chars))] + [-float(i) for i in range(len(pieces))]
    scores += [0.0]
    extra = [("tokenizer.ggml.scores", ("arr", "f32"), scores),
             ("tokenizer.ggml.unknown_token_id", "u32", 0),
             ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2),
             ("tokenizer.ggml.add_bos_token", "bool", True),
             ("tokenizer.ggml.add_space_prefix", "bool", True),
             ("tokenizer.chat_template", "str", (TEMPLATES / template).read_text())]
    return gguf_tokenizer_file("llama", tokens, types, extra)


def gguf_tokenizer_seeds():
    for pre, template in [("default", "chatml.jinja"), ("gpt2", "unsupported_gemma_turns.jinja"),
                          ("llama-bpe", "llama3.jinja"), ("qwen2", "qwen2.5.jinja"),
                          ("smollm", "smollm2.jinja")]:
        write("gguf_tokenizer", f"gpt2_{pre}.gguf", gpt2_vocab(pre, template))
    write("gguf_tokenizer", "llama_sentencepiece.gguf", llama_vocab())
    write("gguf_tokenizer", "llama_no_byte_tokens.gguf",
          llama_vocab(byte_tokens=False, template="unsupported_mistral_inst.jinja"))
    # Invalid: each stops at a different check.
    tokens = ["a", "b", "ab"]
    write("gguf_tokenizer", "bad_model.gguf", gguf_tokenizer_file("bert", tokens, [1, 1, 1], []))
    write("gguf_tokenizer", "bad_pre.gguf", gguf_tokenizer_file(
        "gpt2", tokens, [1, 1, 1], [("tokenizer.ggml.pre", "str", "falcon"),
                                    ("tokenizer.ggml.merges", ("arr", "str"), ["a b"])]))
    write("gguf_tokenizer", "bad_type_count.gguf", gguf_tokenizer_file("gpt2", tokens, [1, 1], []))
    write("gguf_tokenizer", "bad_bos.gguf", gguf_tokenizer_file(
        "gpt2", tokens, [1, 1, 1], [("tokenizer.ggml.bos_token_id", "u32", 3)]))
    write("gguf_tokenizer", "bad_merge.gguf", gguf_tokenizer_file(
        "gpt2", tokens, [1, 1, 1], [("tokenizer.ggml.merges", ("arr", "str"), ["a c"])]))


def chat_template_seeds():
    for template in sorted(TEMPLATES.glob("*.jinja")):
        write("chat_template", template.name, template.read_bytes())


# ---------------------------------------------------------------------------------------------
# tokenizer.model (SentencePiece), trained with spm_train.
# ---------------------------------------------------------------------------------------------
def spm_train(work, name, options, vocab_size=150):
    corpus = work / "corpus.txt"
    corpus.write_text((TEXT + "\n") * 20 + "\n".join(f"line {i} {i * i}" for i in range(200)),
                      encoding="utf-8")
    prefix = work / name
    subprocess.run(["spm_train", f"--input={corpus}", f"--model_prefix={prefix}",
                    f"--vocab_size={vocab_size}", "--hard_vocab_limit=false", "--character_coverage=1.0",
                    "--num_threads=1", "--minloglevel=2", *options],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (work / f"{name}.model").read_bytes()


def sentencepiece_seeds():
    if shutil.which("spm_train") is None:
        sys.exit("spm_train not found: install the Debian package 'sentencepiece'")
    identity = ["--normalization_rule_name=identity", "--remove_extra_whitespaces=false"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # A tiny custom normalisation (A -> a, full-width digit one -> 1) keeps the compiled
        # character map small while still exercising it.
        rules = work / "rules.tsv"
        rules.write_text("41\t61\nFF11\t31\n", encoding="utf-8")
        models = {
            "bpe_byte_fallback.model": spm_train(work, "bpe", [
                "--model_type=bpe", "--byte_fallback=true", "--split_digits=true", *identity],
                vocab_size=400),
            "unigram.model": spm_train(work, "unigram", ["--model_type=unigram", *identity]),
            "unigram_custom_rules.model": spm_train(work, "rules", [
                "--model_type=unigram", f"--normalization_rule_tsv={rules}"]),
            "char_user_symbols.model": spm_train(work, "char", [
                "--model_type=char", "--user_defined_symbols=<tool>,</tool>", *identity]),
        }
    for name, data in models.items():
        write("sentencepiece", name, data)
    unigram = models["unigram.model"]
    write("sentencepiece", "prefix_of_pieces.model", unigram[:300])  # still a valid protobuf
    cut = unigram.index(b"line") + 2  # inside a piece's string: its length runs past the end
    write("sentencepiece", "bad_truncated.model", unigram[:cut])
    write("sentencepiece", "bad_not_protobuf.model", b"\xff\xfe not a protobuf \x00\x01\x02")


def main():
    seeds = {"safetensors": safetensors_seeds, "gguf": gguf_seeds,
             "model_config": model_config_seeds,
             "bpe_tokenizer": bpe_tokenizer_seeds, "sentencepiece": sentencepiece_seeds,
             "gguf_tokenizer": gguf_tokenizer_seeds, "chat_template": chat_template_seeds}
    for target in sys.argv[1:] or seeds:
        make = seeds[target]
        directory = CORPUS / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        make()
        files = sorted(directory.iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
