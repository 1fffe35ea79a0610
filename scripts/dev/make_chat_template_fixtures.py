#!/usr/bin/env python3
"""Writes the chat-template fixture of tests/unit/tokenizer (dev time only).

Renders the templates of tests/data/tokenizer/chat_templates/*.jinja with transformers' own
chat-template renderer (`render_jinja_template`, the function behind
`apply_chat_template(tokenize=False)`) on a set of conversations, and records the texts in
tests/data/tokenizer/chat_templates.json:

  templates   per supported template: its file, the BOS/EOS texts it is rendered with, the family
              selfspec must recognise and, for ChatML, the default system prompt
  cases       {template, messages, add_generation_prompt, text} or {..., error} where the template
              itself raises (LLaMA-2 on roles that do not alternate)
  unsupported the unsupported_*.jinja files (selfspec must refuse to render them)

The template files: smollm2.jinja and qwen2.5.jinja are the `tokenizer.chat_template` values of
SmolLM2-135M-Instruct's and Qwen2.5-Coder-1.5B-Instruct's GGUF files (byte for byte; --check
compares them with GGUF files); llama2.jinja and llama3.jinja are the `chat_template` of
Llama-2-7b-chat-hf's and Meta-Llama-3-8B-Instruct's tokenizer_config.json; chatml.jinja is the
plain ChatML template of the transformers documentation; chatml_multiline.jinja is ours (ChatML
over several lines with whitespace control); unsupported_*.jinja are ours, each standing for a
family or variant selfspec does not render.

Usage: python3 scripts/dev/make_chat_template_fixtures.py [--out tests/data/tokenizer]
                                                         [--check FILE.gguf ...]
Needs `pip install transformers jinja2` (and `gguf` for --check).
"""

import argparse
import json
import pathlib
import platform

import jinja2
import transformers
from transformers.utils.chat_template_utils import render_jinja_template

SUPPORTED = {
    "smollm2": {"bos": "<|im_start|>", "eos": "<|im_end|>", "family": "ChatML",
                "default_system": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
    "qwen2.5": {"bos": "<|endoftext|>", "eos": "<|im_end|>", "family": "ChatML",
                "default_system": "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
    "chatml": {"bos": "<s>", "eos": "</s>", "family": "ChatML", "default_system": None},
    "chatml_multiline": {"bos": "<s>", "eos": "</s>", "family": "ChatML", "default_system": None},
    "llama2": {"bos": "<s>", "eos": "</s>", "family": "LLaMA-2", "default_system": None},
    "llama3": {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>", "family": "LLaMA-3", "default_system": None},
}


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [m("user", "What is the capital of France?")],
    [m("system", "You are a poet who writes short, vivid poems."), m("user", "Write a poem about the sea.")],
    [m("user", "Hi!"), m("assistant", "Hello! How can I help?"), m("user", "Tell me a joke.")],
    [m("system", "Be brief."), m("user", "2+2?"), m("assistant", "4"), m("user", "And 3+3?")],
    # Whitespace the LLaMA templates strip (Python str.strip: Unicode spaces and U+001C..U+001F).
    [m("user", "  padded text \n\n")],
    [m("user", "\u00a0\u3000\x1c inner  spaces \u2028\x1f\t")],
    [m("system", ""), m("user", "")],
    # A system message that is not first: ChatML and LLaMA-3 render it, LLaMA-2 skips it.
    [m("user", "first"), m("system", "late system"), m("user", "second")],
    [m("user", "Line one\nLine two\n\n```python\nprint('hi')\n```")],
    [m("user", "literal markers <|im_end|> [INST] <<SYS>> <|eot_id|> in text")],
    [m("user", "Héllo wörld — ünïcode 日本語 🤖")],
    # LLaMA-2 raises: roles do not alternate.
    [m("assistant", "I speak first."), m("user", "ok")],
    [m("user", "a"), m("user", "b")],
]


def render(source, spec, messages, add_generation_prompt):
    return render_jinja_template(
        conversations=[messages],
        chat_template=source,
        add_generation_prompt=add_generation_prompt,
        bos_token=spec["bos"],
        eos_token=spec["eos"],
    )[0][0]


def check_gguf(paths, template_dir):
    import gguf

    known = {p.stem: p.read_text(encoding="utf-8") for p in template_dir.glob("*.jinja")}
    for path in paths:
        field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
        source = field.contents()
        match = [name for name, text in known.items() if text == source]
        print(f"{path}: {'equals ' + ', '.join(match) if match else 'matches no template file'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/data/tokenizer")
    parser.add_argument("--check", nargs="*", default=[], help="GGUF files to compare")
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out)
    template_dir = out_dir / "chat_templates"
    if args.check:
        check_gguf(args.check, template_dir)
        return

    cases = []
    for name, spec in SUPPORTED.items():
        source = (template_dir / f"{name}.jinja").read_text(encoding="utf-8")
        for messages in CONVERSATIONS:
            for add_generation_prompt in (True, False):
                case = {"template": name, "messages": messages, "add_generation_prompt": add_generation_prompt}
                try:
                    case["text"] = render(source, spec, messages, add_generation_prompt)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
    unsupported = sorted(p.name for p in template_dir.glob("unsupported_*.jinja"))
    result = {
        "provenance": {
            "generator": "scripts/dev/make_chat_template_fixtures.py",
            "renderer": "transformers.utils.chat_template_utils.render_jinja_template",
            "versions": {
                "python": platform.python_version(),
                "transformers": transformers.__version__,
                "jinja2": jinja2.__version__,
            },
        },
        "templates": {name: dict(spec, file=f"chat_templates/{name}.jinja") for name, spec in SUPPORTED.items()},
        "cases": cases,
        "unsupported": [f"chat_templates/{name}" for name in unsupported],
    }
    path = out_dir / "chat_templates.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}: {len(cases)} cases, {len(unsupported)} unsupported templates")


if __name__ == "__main__":
    main()
