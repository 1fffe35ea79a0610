#!/usr/bin/env python3
"""Writes the GGUF byte-level BPE tokenizer fixture of tests/unit/tokenizer (dev time only).

For each GGUF pre-tokenizer selfspec supports (tokenizer.ggml.pre = gpt2, llama-bpe, qwen2,
smollm) this trains a small byte-level BPE with the Hugging Face `tokenizers` package and records,
in tests/data/tokenizer/gguf_bpe.json:

  metadata  what a GGUF file would hold: tokenizer.ggml.model/pre/tokens/token_type/merges,
            bos/eos/padding ids and add_bos_token (the C++ test writes these with GgufWriter)
  cases     {text, ids_without_special, ids_with_special, decoded} as the reference pipeline of
            that pre-tokenizer encodes them with `tokenizers` (the model families' own
            tokenizer.json pipelines):
              gpt2       ByteLevel(add_prefix_space=False, use_regex=True)
              llama-bpe  Split(LLaMA-3 regex, Isolated) + ByteLevel(use_regex=False),
                         BPE ignore_merges=True
              qwen2      Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=False)
              smollm     Digits(individual_digits=True) + ByteLevel(use_regex=True)
            with the control tokens as special added tokens, the user-defined one as a
            non-special added token, and BOS prepended when add_bos_token is true.

So that the splitting shows in the ids, the merges are learned WITHOUT any pre-tokenization
(ByteLevel with use_regex=False on whole lines): they then join letters with digits, spaces with
newlines, apostrophes with capitals, and a pre-tokenizer that splits differently from the
reference produces different ids. llama-bpe's vocabulary also gets whole words that no merge
reaches, so ignore_merges matters; every vocabulary gets a few unused "[PAD…]" tokens (type 5) at
the end, as Qwen's GGUF has.

The output is deterministic (single-threaded training, fixed corpus).

Usage: python3 scripts/dev/make_gguf_tokenizer_fixtures.py [--out tests/data/tokenizer]
Needs `pip install tokenizers`.
"""

import argparse
import json
import os
import pathlib
import platform

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = ["<tool_call>"]
UNUSED = ["[PAD900]", "[PAD901]", "[PAD902]"]
BOS, EOS = "<|im_start|>", "<|im_end|>"

CORPUS_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "I'M SURE YOU'RE RIGHT, DON'T WORRY. It's fine, isn't it? They'll see, we'd go.",
    "Numbers: 1234567890 and 3.14159, 2024-05-17, 1 234 567, x1y22z333w4444, a1 b22 c333.",
    "Prices rose 12.5% to $1,299.99; call +1 (555) 123-4567 now!!!",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < 10; ++i) {\n\tsum += i * i;\n}\n",
    "Line one\nLine two\n\n\nLine five\r\nWindows line\r\n",
    "Multiple   spaces   between   words   and  trailing  ",
    "Café, naïve, résumé, façade; Über grün straße. Ωmega ǅemal.",
    "日本語のテキストです。中文句子：我们在学习。한국어 문장.",
    "Emoji 😀 🎉 👍🏽 and 🤖 robots, ½ cup, ² squared, ٣٤٥ digits.",
    "<html><body><p>Paragraph &amp; more</p></body></html> https://example.com/a?b=1&c=2",
    "email@example.com -- foo==bar a/b\\c ...?! (parenthesised) [bracketed] {braced}",
]

TEXTS = [
    "",
    " ",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'M SURE YOU'RE RIGHT",
    "DON'T", "don't", "they'LL", "it's", "WE'D", "I've", "o'clock", "rock 'n' roll",
    "12345", "1234567890", "3.14159", "1 234 567", "x1y22z333w4444", "a1 b22 c333",
    "a  1", "a   b", "a 1", "1 2  3   4",
    "٣٤٥ Arabic-Indic", "½ cup ² ³", "Ⅻ roman",
    "  leading spaces", "trailing spaces   ", "\ttab\tseparated\t", "x\t\ty",
    "\n", "\n\n\nx", "line\r\nbreak\r\n", " \n \n", "a\n b", "a \nb",
    "    def f():\n        return 1\n",
    "for (int i = 0; i < 10; ++i) {\n\tsum += i;\n}",
    "Hello, world!!!", "...?!", "--foo==bar", "a/b\\c", "email@example.com", "$100.00 (approx.)",
    "café naïve résumé", "Über grün straße", "日本語のテキスト", "中文句子：我们", "한국어",
    "emoji 😀👍🏽 family 👨‍👩‍👧", "Ωmega ǅemal ｆｕｌｌｗｉｄｔｈ", "combining e\u0301 a\u0308",
    "non\u00a0breaking\u3000space",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|>",
    "text<|endoftext|>more text",
    "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>",
    "partial <|im_sta and <tool_cal",
    " <|im_end|> spaced ",
    "[PAD900] is plain text",
]


def corpus():
    lines = []
    for repeat in range(3):
        lines.extend(CORPUS_LINES)
    return lines


def train(ignore_merges, extra_words):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        min_frequency=2,
        special_tokens=CONTROL + USER_DEFINED,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    state = json.loads(tokenizer.to_str())
    vocab = state["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    for word in extra_words + UNUSED:
        if word not in vocab:
            vocab[word] = len(vocab)
    tokens = [None] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    assert all(t is not None for t in tokens)
    return tokens, merges


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


PIPELINES = {
    "gpt2": (byte_level(True), False, False, []),
    "llama-bpe": (
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"), byte_level(False)]),
        True,
        True,
        ["Ġquick", "Ġlazy", "Ġfibonacci", "Ġbetween"],
    ),
    "qwen2": (
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PATTERN), "isolated"), byte_level(False)]),
        False,
        False,
        [],
    ),
    "smollm": (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)]),
        False,
        False,
        [],
    ),
}


def reference(tokens, merges, pre_tokenizer, ignore_merges, add_bos):
    vocab = {token: index for index, token in enumerate(tokens)}
    merge_pairs = [tuple(m.split(" ")) for m in merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merge_pairs, ignore_merges=ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in CONTROL])
    tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in USER_DEFINED])
    if add_bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])]
        )
    return tokenizer


def token_type(token):
    if token in CONTROL:
        return 3
    if token in USER_DEFINED:
        return 4
    if token in UNUSED:
        return 5
    return 1


def fixture(pre):
    pre_tokenizer, ignore_merges, add_bos, extra_words = PIPELINES[pre]
    tokens, merges = train(ignore_merges, extra_words)
    tokenizer = reference(tokens, merges, pre_tokenizer, ignore_merges, add_bos)
    cases = []
    for text in TEXTS:
        without = tokenizer.encode(text, add_special_tokens=False).ids
        cases.append(
            {
                "text": text,
                "ids_without_special": without,
                "ids_with_special": tokenizer.encode(text, add_special_tokens=True).ids,
                "decoded": tokenizer.decode(without, skip_special_tokens=False),
            }
        )
    metadata = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [token_type(t) for t in tokens],
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": tokens.index(BOS),
        "tokenizer.ggml.eos_token_id": tokens.index(EOS),
        "tokenizer.ggml.padding_token_id": tokens.index("<|endoftext|>"),
        "tokenizer.ggml.add_bos_token": add_bos,
    }
    return {"metadata": metadata, "ignore_merges": ignore_merges, "cases": cases}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/data/tokenizer")
    args = parser.parse_args()
    result = {
        "provenance": {
            "generator": "scripts/dev/make_gguf_tokenizer_fixtures.py",
            "versions": {"python": platform.python_version(), "tokenizers": tokenizers.__version__},
        },
        "tokenizers": {pre: fixture(pre) for pre in PIPELINES},
    }
    path = pathlib.Path(args.out) / "gguf_bpe.json"
    path.write_text(json.dumps(result, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
