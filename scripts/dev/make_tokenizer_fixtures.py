#!/usr/bin/env python3
"""Writes the tokenizer.json exactness fixtures of tests/unit/tokenizer (dev time only).

Uses the Hugging Face `tokenizers` package (the reference implementation) to train two small
byte-level BPE tokenizers on a built-in corpus and records what it makes of ~80 strings:

  tests/data/tokenizer/llama3_style.tokenizer.json
      The LLaMA-3 pipeline: pre_tokenizer Sequence[Split(LLaMA-3 regex, Isolated),
      ByteLevel(add_prefix_space=False, use_regex=False)], BPE with ignore_merges=True (plus a
      few vocabulary entries that no merge produces, so ignore_merges matters), decoder
      ByteLevel, post_processor Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|> $A)],
      special added tokens <|begin_of_text|> <|end_of_text|> <|eot_id|> <|start_header_id|>
      <|end_header_id|>. Merges in the [["a", "b"], ...] format.
  tests/data/tokenizer/gpt2_style.tokenizer.json
      The GPT-2 pipeline: pre_tokenizer ByteLevel(add_prefix_space=False, use_regex=True),
      decoder ByteLevel, post_processor ByteLevel; added tokens with lstrip / rstrip /
      single_word / normalized options. Merges in the legacy ["a b", ...] format.
  tests/data/tokenizer/vectors.json
      For each tokenizer: cases {text, ids_with_special, ids_without_special, decoded,
      decoded_skip_special} where decoded* decode ids_with_special with
      skip_special_tokens False / True, and decode_cases {ids, skip_special_tokens, text} that
      cut multi-byte characters and include an unknown id.

The output is deterministic (single-threaded training, fixed corpus): rerunning it with the same
`tokenizers` version rewrites identical files.

Usage: python3 scripts/dev/make_tokenizer_fixtures.py [--out tests/data/tokenizer]
"""

import argparse
import json
import os
import pathlib

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import (  # noqa: E402
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    pre_tokenizers,
    processors,
    trainers,
)

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA3_SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
]

# Vocabulary entries no merge produces: with ignore_merges=True a pre-token equal to one of them
# is emitted as that single id.
LLAMA3_EXTRA_VOCAB = ["Ġsupercalifragilistic", "Ġxylophonequartz", "æĹ¥æľ¬èªŀ"]

VOCAB_SIZE = 1200

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a small corpus for training a tokenizer.",
    "I can't believe it's already time to go; we'll see you tomorrow.",
    "She'd said they've been there, but I'm not sure you're right.",
    "DON'T SHOUT. It's fine, isn't it? WE'RE HERE!",
    "Numbers like 1234567890, 3.14159 and 2024-05-17 appear in text.",
    "The meeting is at 10:30 in room 42, floor 7.",
    "Prices rose by 12.5% to $1,299.99 last year.",
    "Machine learning models learn patterns from data.",
    "Speculative decoding drafts tokens with a small model and verifies them.",
    "Large language models generate one token at a time.",
    "The cache stores keys and values for every layer.",
    "Café, naïve, résumé, façade and coöperate use accents.",
    "Über, schön, Straße, grüßen: deutsche Wörter.",
    "Él está aquí. ¿Dónde está la biblioteca? ¡Qué bien!",
    "日本語の文章を書きます。東京は大きい都市です。",
    "中文句子：我们在学习。今天天气很好。",
    "Emoji are fun 😀 🎉 👍 and sometimes 🚀 too.",
    "Русский текст тоже встречается в данных.",
    "Ελληνικά γράμματα: α β γ δ.",
    "def add(a, b):\n    return a + b",
    "for i in range(10):\n    print(i * i)",
    "int main() { std::cout << \"hi\" << std::endl; return 0; }",
    "std::vector<int> values = {1, 2, 3};",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"flag\": true}",
    "if (x > 0 && y < 10) { z = x + y; }",
    "import numpy as np\nx = np.zeros((3, 4))",
    "<html><body><p>Paragraph</p></body></html>",
    "https://example.com/docs/index.html?lang=en&page=2",
    "user@example.com wrote: thanks!",
    "  Indented line with leading spaces",
    "Tabs\tseparate\tcolumns\there",
    "Line one\nLine two\r\nLine three",
    "Multiple   spaces   between   words",
    "A sentence that ends with spaces   ",
    "Questions? Answers! Ellipses... Dashes - and -- more.",
    "The year 1999 was followed by 2000 and 2001.",
    "Version 2.0.1 fixed 37 bugs in 14 modules.",
    "x = 42; y = x * 2; print(x, y)",
    "return result; // comment",
]

WORDS = (
    "the of and to in is was for on that with as by at from this be or are an it not which "
    "have had has but all were when we there can been one would will if more their who about "
    "time people year way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education token model layer tensor kernel decode encode prompt batch vocabulary merge"
).split()


def corpus():
    """A deterministic corpus: the sentences, plus pseudo-random word sequences (LCG)."""
    lines = list(SENTENCES) * 3
    state = 12345
    for n in range(300):
        words = []
        length = 6 + n % 11
        for _ in range(length):
            state = (state * 1103515245 + 12345) % (2**31)
            words.append(WORDS[state % len(WORDS)])
        if n % 5 == 0:
            words[0] = words[0].capitalize()
        if n % 7 == 0:
            words.append(str(state % 100000))
        lines.append(" ".join(words) + (".", "!", "?", ",", ";")[n % 5])
    return lines


COMMON_TEXTS = [
    # Ordinary English.
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you today?",
    "Speculative decoding verifies drafted tokens in one pass.",
    "unbelievably uncharacteristically antidisestablishmentarianism",
    # Contractions and case.
    "I'm sure you're right; they've said we'll go and she'd agree.",
    "DON'T STOP, IT'S FINE. I'M HERE. WE'RE READY. THEY'VE LEFT. I'D GO.",
    "o'clock rock'n'roll 'quoted' it's Its IT'S",
    # Unicode.
    "café naïve résumé façade",
    "Über straße groß GRÜSSE",
    "日本語のテキストです。",
    "中文测试，标点符号。",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇩🇪",
    "combining e\u0301 a\u0308 n\u0303 o\u0302",
    "Ελληνικά και русский текст",
    "عربي: مرحبا بالعالم",
    "עברית: שלום עולם",
    "한국어 문장입니다",
    "mixed日本English中文text",
    "non\u00a0breaking\u00a0spaces",
    "next\u0085line and thin\u2009space and ideographic\u3000space",
    "zero\u200bwidth\u200djoiner",
    "mongolian\u180evowel \u180e'd separator  \u180e",
    "\U0001f642",
    "fullwidth ＡＢＣ and math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    # Whitespace.
    "  leading spaces",
    "trailing spaces   ",
    "multiple     spaces     inside",
    "\ttab\tseparated\t",
    "windows\r\nline\r\nendings\r\n",
    "blank\n\n\nlines\n\n",
    "\n",
    " ",
    "   ",
    "\n\n",
    "mixed \t \n whitespace \r\n  end",
    "line one\nline two\n",
    "    indented\n        more indented\n",
    # Digits.
    "1234567890",
    "3.14159265358979",
    "Phone: +1 (555) 123-4567",
    "Year 2024, count 1000000 and 12 and 7",
    "１２３ fullwidth digits ٣٤٥ arabic-indic",
    "12abc34def5678",
    # Code.
    "def add(a, b):\n    return a + b\n",
    'int main() {\n  std::cout << "hi" << std::endl;\n  return 0;\n}\n',
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "x+=1;y-=2;z*=3;",
    "if (a && b || !c) { return -1; }",
    "<html><body>tags</body></html>",
    "https://example.com/path?q=1&r=2#frag",
    "// comment\n/* block */\n# hash",
    # Special-token text embedded in text.
    "Hello<|eot_id|>world",
    "<|eot_id|>",
    "<|begin_of_text|>Hi there",
    "text <|eot_id|> more text",
    "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|eot_id|><|eot_id|>",
    "<|eot_id",
    "almost<|eot_id |>",
    "word<|end_of_text|>",
    "Hello<|endoftext|>world",
    # ignore_merges: vocabulary entries that no merge produces.
    " supercalifragilistic",
    "a supercalifragilistic xylophonequartz",
    "supercalifragilistic",
    "日本語",
    # Empty.
    "",
]

GPT2_TEXTS = [
    "a <mask> b",
    "a    <mask>b",
    "<mask>start",
    "[RSTRIP]   tail",
    "x [RSTRIP]\t\ty",
    "selfspec is a selfspec",
    "notselfspec selfspecs selfspec.",
    "line\nselfspec\tend_selfspec selfspec\u0301 日selfspec",
    "a spaced token here",
    " spaced token",
]

DECODE_CUT_TEXTS = ["日本語のテキストです。", "emoji 😀👍🏽 family 👨‍👩‍👧", "café naïve"]


def train(pre_tokenizer, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def make_llama3():
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok = train(pre, ignore_merges=True)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for token in LLAMA3_EXTRA_VOCAB:
        assert token not in vocab, token
        vocab[token] = len(vocab)
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in LLAMA3_SPECIALS]
    )
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                special_tokens=[("<|begin_of_text|>", bos)],
            ),
        ]
    )
    spec = json.loads(tok.to_str())
    assert spec["model"]["ignore_merges"] is True
    assert isinstance(spec["model"]["merges"][0], list), "expected [a, b] merges"
    return spec


def make_gpt2():
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), False)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(
        [
            AddedToken("<|endoftext|>", special=True, normalized=False),
            AddedToken("<mask>", special=True, normalized=False, lstrip=True),
            AddedToken("[RSTRIP]", special=True, normalized=False, rstrip=True),
        ]
    )
    tok.add_tokens(
        [
            AddedToken("selfspec", special=False, normalized=True, single_word=True),
            AddedToken(" spaced token", special=False, normalized=False),
        ]
    )
    spec = json.loads(tok.to_str())
    merges = spec["model"]["merges"]
    if merges and isinstance(merges[0], list):
        for a, b in merges:
            assert " " not in a and " " not in b
        spec["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return spec


def vectors(tokenizer_json, texts):
    tok = Tokenizer.from_str(tokenizer_json)
    cases = []
    for t in texts:
        with_special = tok.encode(t, add_special_tokens=True).ids
        cases.append(
            {
                "text": t,
                "ids_with_special": with_special,
                "ids_without_special": tok.encode(t, add_special_tokens=False).ids,
                "decoded": tok.decode(with_special, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(with_special, skip_special_tokens=True),
            }
        )
    decode_cases = []
    for t in DECODE_CUT_TEXTS:
        ids = tok.encode(t, add_special_tokens=False).ids
        for k in range(1, len(ids) + 1):
            decode_cases.append(
                {"ids": ids[:k], "skip_special_tokens": False, "text": tok.decode(ids[:k], False)}
            )
    unknown = tok.get_vocab_size(with_added_tokens=True) + 100
    specials = [tok.token_to_id(s) for s in ("<|eot_id|>", "<|endoftext|>") if tok.token_to_id(s)]
    hello = tok.encode("Hello world", add_special_tokens=False).ids
    mixed = specials + hello + [unknown] + specials + hello
    for skip in (False, True):
        decode_cases.append(
            {"ids": mixed, "skip_special_tokens": skip, "text": tok.decode(mixed, skip)}
        )
    return {"cases": cases, "decode_cases": decode_cases}


def dump_tokenizer(spec):
    """Pretty JSON with one vocabulary entry / merge per line (small, diff-friendly)."""
    text = json.dumps(spec, ensure_ascii=False, indent=2)
    # Put each [a, b] merge on one line.
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "[" and i + 3 < len(lines) and lines[i + 3].strip() in ("]", "],"):
            a = lines[i + 1].strip()
            b = lines[i + 2].strip()
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}[{a} {b}{lines[i + 3].strip()}")
            i += 4
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n"


def dump_vectors(data):
    """One case per line."""
    parts = ["{"]
    parts.append('  "generator": "scripts/dev/make_tokenizer_fixtures.py",')
    parts.append(f'  "tokenizers_version": {json.dumps(tokenizers.__version__)},')
    parts.append('  "tokenizers": {')
    names = list(data)
    for n, name in enumerate(names):
        entry = data[name]
        parts.append(f'    {json.dumps(name)}: {{')
        parts.append(f'      "file": {json.dumps(entry["file"])},')
        for key in ("cases", "decode_cases"):
            parts.append(f'      "{key}": [')
            items = entry[key]
            for k, item in enumerate(items):
                comma = "," if k + 1 < len(items) else ""
                parts.append("        " + json.dumps(item, ensure_ascii=False) + comma)
            parts.append("      ]" + ("," if key == "cases" else ""))
        parts.append("    }" + ("," if n + 1 < len(names) else ""))
    parts.append("  }")
    parts.append("}")
    return "\n".join(parts) + "\n"


def main():
    root = pathlib.Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=root / "tests" / "data" / "tokenizer")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    specs = {
        "llama3_style": (make_llama3(), COMMON_TEXTS + GPT2_TEXTS),
        "gpt2_style": (make_gpt2(), COMMON_TEXTS + GPT2_TEXTS),
    }
    data = {}
    for name, (spec, texts) in specs.items():
        file_name = f"{name}.tokenizer.json"
        text = dump_tokenizer(spec)
        assert json.loads(text) == spec
        (args.out / file_name).write_text(text, encoding="utf-8")
        entry = vectors(text, texts)
        entry["file"] = file_name
        data[name] = entry
    (args.out / "vectors.json").write_text(dump_vectors(data), encoding="utf-8")
    for name in ("llama3_style.tokenizer.json", "gpt2_style.tokenizer.json", "vectors.json"):
        print(f"{args.out / name}: {(args.out / name).stat().st_size} bytes")


if __name__ == "__main__":
    main()
