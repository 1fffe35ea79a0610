#!/usr/bin/env python3
"""Helpers of scripts/get-open-text.sh: text extraction, staging and the capped selection.

scripts/get-open-text.sh runs this file (with its PYTHON, /usr/bin/python3 by default) for every
step that is not a download or an unpacking; see there for the corpora and the layout they get.

    get_open_text.py html SRC_ROOT OUT_ROOT [PATTERN ...]
        the HTML files under SRC_ROOT whose relative path fully matches a PATTERN (a regex; one
        starting with '!' excludes) as plain text, OUT_ROOT/<path without .html>.txt
    get_open_text.py jargon JARGON_TXT OUT_ROOT
        The Jargon File's jargon.txt as one document per chapter, lexicon letter and appendix
    get_open_text.py stdlib STDLIB OUT_ROOT
        the Python standard library's .py files, without test suites and generated files
    get_open_text.py select STAGED META_DIR OUT_DIR MAX_BYTES
        the staged documents under a total of MAX_BYTES, and OUT_DIR/SOURCES.json
    get_open_text.py meta NAME ORIGIN PACKAGE VERSION LICENSE OUT_JSON
        a source's provenance, for select (META_DIR/<name>.json)
    get_open_text.py fingerprint FILE ...
        the first 16 hex digits of the sha256 of the files' contents, one after the other (the
        script's stamp: an edited script or helper rebuilds what an older one made)

Progress goes to stderr. A step that finds nothing to write exits 1 with a message.
"""
import argparse
import collections
import hashlib
import html.parser
import json
import os
import re
import shutil
import sys
import unicodedata

MIN_DOC_CHARS = 400  # a page with less text than this (an index, a redirect) is left out


def read_text(path):
    """The file's text: UTF-8, else cp1252 (undecodable bytes replaced)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def clean(text):
    """NFC, no NBSP/zero-width/control characters, trailing spaces off, <= 1 blank line in a row."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\u00a0", " ").replace("\u200b", "").replace("\ufeff", "")
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cc")
    lines = [line.rstrip() for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return text.strip() + "\n"


def write_doc(out_root, rel, text):
    """Writes text as UTF-8 (LF line ends) to out_root/rel, making its folders."""
    path = os.path.join(out_root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


# --- HTML to plain text -------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}
SKIP_TAGS = {"head", "script", "style", "noscript", "nav", "header", "footer", "pre", "table",
             "svg", "button", "form", "select", "textarea", "iframe", "object", "math"}
# class or id tokens of navigation, tables of contents, sidebars and permalink markers
SKIP_MARKS = {"navheader", "navfooter", "toc", "lot", "list-of-tables", "list-of-figures",
              "sphinxsidebar", "sphinxsidebarwrapper", "related", "headerlink", "footer",
              "breadcrumb", "breadcrumbs", "menu-bar", "sidebar-scrollbox", "nav-wrapper",
              "nav-chapters", "mobile-nav-chapters", "docnav", "banner", "toc-backref",
              "highlight", "doctest", "screen", "programlisting", "synopsis", "cmdsynopsis",
              "funcsynopsis", "literallayout", "searchbox", "copyright", "legalnotice",
              "footnotes", "ferris-container", "toctree-wrapper", "index",
              "indexterm", "linenos", "mobile-nav", "search-wrapper"}
BLOCK = {"p", "div", "section", "article", "main", "body", "li", "ul", "ol", "dl", "dt", "dd",
         "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "figure", "figcaption", "caption",
         "address", "aside", "details", "summary", "center"}


class Node:
    """An element of the parsed page: its tag, attributes and children (Nodes and strings)."""
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.children = tag, attrs, []


class TreeBuilder(html.parser.HTMLParser):
    """A forgiving tree: void tags are leaves, an end tag closes up to its open element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        """Opens an element (a void one is a leaf)."""
        node = Node(tag, {k: (v or "") for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        """A self-closing element: a leaf."""
        self.stack[-1].children.append(Node(tag, {k: (v or "") for k, v in attrs}))

    def handle_endtag(self, tag):
        """Closes the innermost open element of that tag and all inside it (none: ignored)."""
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        """Text, as a child of the open element."""
        self.stack[-1].children.append(data)


def marks(node):
    """The node's class tokens and its id."""
    return set(node.attrs.get("class", "").split()) | {node.attrs.get("id", "")}


def find_first(node, predicate):
    """The first node, breadth first, for which predicate holds (None if none)."""
    queue = collections.deque([node])
    while queue:
        current = queue.popleft()
        if predicate(current):
            return current
        queue.extend(c for c in current.children if isinstance(c, Node))
    return None


def content_root(root):
    """The page's main content: Sphinx's div.body, mdBook's <main>, asciidoc's #content, ..."""
    for predicate in (lambda n: n.attrs.get("role") == "main",
                      lambda n: n.tag == "div" and "body" in marks(n),
                      lambda n: n.tag == "main",
                      lambda n: n.tag == "body" and "manpage" in marks(n),  # asciidoc: + NAME
                      lambda n: n.attrs.get("id") == "content",
                      lambda n: n.tag == "body"):
        found = find_first(root, predicate)
        if found is not None:
            return found
    return root


class Renderer:
    """Walks a tree into paragraphs: one per block element, whitespace collapsed, "- " before
    a list item's first one; skipped tags and marked elements leave nothing."""

    def __init__(self):
        self.blocks, self.inline, self.prefix = [], [], ""

    def flush(self):
        """Ends the current paragraph (kept only if it holds a word character)."""
        text = re.sub(r"\s+", " ", "".join(self.inline)).strip()
        if re.search(r"\w", text):
            self.blocks.append(self.prefix + text)
            self.prefix = ""
        self.inline = []

    def walk(self, node):
        """Renders node's children."""
        for child in node.children:
            if isinstance(child, str):
                self.inline.append(child)
                continue
            if child.tag in SKIP_TAGS or marks(child) & SKIP_MARKS:
                continue
            if child.tag == "br":
                self.inline.append(" ")
            elif child.tag in BLOCK:
                self.flush()
                if child.tag == "li":
                    self.prefix = "- "
                self.walk(child)
                self.flush()
            else:
                self.walk(child)


def html_to_text(path):
    """The main content of the HTML file at path as clean plain text, paragraphs apart."""
    builder = TreeBuilder()
    builder.feed(read_text(path))
    builder.close()
    renderer = Renderer()
    renderer.walk(content_root(builder.root))
    renderer.flush()
    # "- " alone before a nested block: keep the marker on the block's first paragraph
    return clean("\n\n".join(renderer.blocks))


def cmd_html(src_root, out_root, *patterns):
    """Converts the HTML files under src_root that match a pattern (regex on the relative path,
    '!' prefix = exclude) into out_root/<relative path without .html>.txt."""
    include = [re.compile(p) for p in patterns if not p.startswith("!")]
    exclude = [re.compile(p[1:]) for p in patterns if p.startswith("!")]
    kept = dropped = 0
    for dirpath, _, names in os.walk(src_root):
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(dirpath, name), src_root)
            if not any(p.fullmatch(rel) for p in include) or any(p.fullmatch(rel) for p in exclude):
                continue
            text = html_to_text(os.path.join(dirpath, name))
            if len(text) < MIN_DOC_CHARS:
                dropped += 1
                continue
            write_doc(out_root, re.sub(r"\.html?$", "", rel) + ".txt", text)
            kept += 1
    print(f"{kept} documents, {dropped} pages with too little text left out", file=sys.stderr)
    if kept == 0:
        sys.exit(f"no document converted from {src_root}")


# --- The Jargon File (plain text) ----------------------------------------------------------------

def cmd_jargon(txt_path, out_root):
    """jargon.txt: the introduction's chapters, the lexicon (one document per initial letter) and
    the appendices, each unwrapped into paragraphs; {cross references} lose their braces. The
    front matter and the glossary's list of entry names are left out."""
    lines = read_text(txt_path).split("\n")
    docs, name, body = {}, None, []

    def close():
        if name is not None and body:
            docs.setdefault(name, []).extend(body + [""])

    in_lexicon = False
    for line in lines:
        # (the headings hold no-break spaces: "Chapter\u00a01.\u00a0Hacker Slang ...")
        chapter = re.match(r"^(Chapter\s+\d+|Appendix\s+[A-Z])\.\s+(.+)$", line)
        if chapter:
            close()
            in_lexicon = False
            name = re.sub(r"\W+", "-", chapter.group(1).lower())
            body = [chapter.group(1) + ". " + chapter.group(2).strip()]
            continue
        if re.match(r"^\s+Part\s+I+\.\s", line) or re.match(r"^Bibliography\s*$", line):
            close()
            name, body, in_lexicon = None, [], False
            continue
        entry = re.match(r"^   :([^:]+):", line)
        if entry:
            in_lexicon = True
            first = entry.group(1).strip()[:1].upper()
            letter = first if "A" <= first <= "Z" else "0"
            if name != f"lexicon-{letter}":
                close()
                name, body = f"lexicon-{letter}", []
            body.append(line.strip())
            continue
        if name is not None and (in_lexicon or name.startswith(("chapter", "appendix"))):
            body.append(line.strip())
    close()
    for name, body in docs.items():
        paragraphs, current = [], []
        for line in body:
            if line:
                current.append(line)
            elif current:
                paragraphs.append(" ".join(current))
                current = []
        # a chapter's own "Table of Contents" (a run of short title lines) is left out
        kept, in_toc = [], False
        for p in paragraphs:
            if p == "Table of Contents":
                in_toc = True
            elif not (in_toc and len(p) < 80):
                in_toc = False
                kept.append(p)
        text = "\n\n".join(re.sub(r"\{([^{}]+)\}", r"\1", p) for p in kept)
        text = clean(text)
        if len(text) >= MIN_DOC_CHARS:
            write_doc(out_root, name + ".txt", text)
    print(f"{len(docs)} documents", file=sys.stderr)
    if not docs:
        sys.exit(f"no chapter or lexicon entry found in {txt_path}")


# --- Python standard library ---------------------------------------------------------------------

STDLIB_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages",
                    "__pycache__", "pydoc_data"}


def cmd_stdlib(stdlib, out_root):
    """The stdlib's .py files as they are (UTF-8 only), without test suites, third-party
    packages and generated files."""
    kept = skipped = 0
    for dirpath, dirnames, names in os.walk(stdlib):
        rel_dir = os.path.relpath(dirpath, stdlib)
        dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_SKIP_DIRS
                             and not (rel_dir == "." and d.startswith("config-")))
        for name in sorted(names):
            if not name.endswith(".py") or name.startswith("_sysconfigdata"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                data = f.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                skipped += 1
                continue
            head = text[:2000]
            if re.search(r"(?i)(gencodec\.py|do not edit|automatically generated|auto-generated)",
                         head):
                skipped += 1
                continue
            if not text.strip():
                continue
            write_doc(out_root, os.path.normpath(os.path.join(rel_dir, name)), text)
            kept += 1
    print(f"{kept} files, {skipped} generated or non-UTF-8 files left out", file=sys.stderr)
    if kept == 0:
        sys.exit(f"no .py file found under {stdlib}")


# --- Selection under the cap, and SOURCES.json --------------------------------------------------

def cmd_select(staged, meta_dir, out_dir, max_bytes):
    """Copies staged/<source>/** into out_dir/<source>/** under a total of max_bytes (equal
    shares, unused share passed on), and writes out_dir/SOURCES.json."""
    max_bytes = int(max_bytes)
    sources = []
    for meta_name in sorted(os.listdir(meta_dir)):
        with open(os.path.join(meta_dir, meta_name), encoding="utf-8") as f:
            meta = json.load(f)
        root = os.path.join(staged, meta["name"])
        files = []
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                files.append((hashlib.sha1(rel.encode()).hexdigest(), rel, os.path.getsize(path)))
        files.sort()
        sources.append((meta, root, files))
    # water-filling: the smallest sources first, each up to an equal share of what is left
    budgets = {}
    left, pending = max_bytes, sorted(sources, key=lambda s: sum(f[2] for f in s[2]))
    while pending:
        share = left // len(pending)
        meta, _, files = pending.pop(0)
        budgets[meta["name"]] = min(share, sum(f[2] for f in files))
        left -= budgets[meta["name"]]
    summary = []
    for meta, root, files in sources:
        taken = taken_bytes = 0
        for _, rel, size in files:
            if taken_bytes + size > budgets[meta["name"]]:
                continue  # a smaller document further on may still fit
            dst = os.path.join(out_dir, meta["name"], rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(root, rel), dst)
            taken += 1
            taken_bytes += size
        entry = dict(meta)
        entry.update(files=taken, bytes=taken_bytes, available_files=len(files),
                     available_bytes=sum(f[2] for f in files))
        summary.append(entry)
        print(f"{meta['name']}: {taken} of {len(files)} files, {taken_bytes / 2**20:.2f} of "
              f"{entry['available_bytes'] / 2**20:.2f} MiB", file=sys.stderr)
    with open(os.path.join(out_dir, "SOURCES.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")


# --- Small steps of the script -------------------------------------------------------------------

def cmd_meta(name, origin, package, version, license_, out):
    """Records a source's provenance for SOURCES.json (select reads it): a JSON object with name,
    origin, package, version and license, written to out."""
    with open(out, "w") as f:
        json.dump({"name": name, "origin": origin, "package": package, "version": version,
                   "license": license_}, f)


def fingerprint(*paths):
    """The first 16 hex digits of the sha256 of the files' contents, one after the other."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def cmd_fingerprint(*paths):
    """Prints fingerprint(paths)."""
    print(fingerprint(*paths))


COMMANDS = {
    "html": (cmd_html, ["src_root", "out_root", "*patterns"]),
    "jargon": (cmd_jargon, ["txt_path", "out_root"]),
    "stdlib": (cmd_stdlib, ["stdlib", "out_root"]),
    "select": (cmd_select, ["staged", "meta_dir", "out_dir", "max_bytes"]),
    "meta": (cmd_meta, ["name", "origin", "package", "version", "license", "out"]),
    "fingerprint": (cmd_fingerprint, ["+paths"]),
}


def parse_args(argv):
    """The command and its arguments, as (function, list of strings)."""
    parser = argparse.ArgumentParser(
        prog="get_open_text.py",
        description="Helpers of scripts/get-open-text.sh (see there, and this file's docstring).")
    commands = parser.add_subparsers(dest="command", required=True)
    for command, (function, params) in COMMANDS.items():
        sub = commands.add_parser(command, help=function.__doc__.split("\n")[0])
        for param in params:
            if param[0] in "*+":
                sub.add_argument(param[1:], nargs=param[0])
            else:
                sub.add_argument(param)
    args = parser.parse_args(argv)
    function, params = COMMANDS[args.command]
    values = []
    for param in params:
        value = getattr(args, param.lstrip("*+"))
        values.extend(value if param[0] in "*+" else [value])
    return function, values


def main(argv=None):
    """Runs one command (see the module's docstring)."""
    function, values = parse_args(sys.argv[1:] if argv is None else argv)
    function(*values)


if __name__ == "__main__":
    main()
