#!/usr/bin/env python3
"""Checks every quoted #include against the layer table of docs/ARCHITECTURE.md.

    python3 scripts/dev/check_layers.py [--root DIR] [--graph]

The table ("| folder | may include |", in the "## Layers" section) lists every source folder and
the folders its files may include (`*`: any folder; a folder's own files are always allowed).
Every .hpp/.cpp/.cu/.cuh/.h file under a listed folder belongs to the longest listed folder above
it (kernels/cpu/x.cpp to kernels/cpu, launch/bench/x.cpp to launch). A quoted include is resolved
the way the compiler does: next to the including file first, then in the include directories
every target gets (src/ and the repository root: selfspec_options in CMakeLists.txt), so
"model/kv_cache.hpp" is src/model's and "kernels/cpu/matmul.hpp" kernels/cpu's. An include of a
file that does not exist is placed by the first of those paths that falls in a listed folder.
Angle-bracket includes, includes resolving outside the listed folders, and anything in a comment
are ignored.

It fails (exit 1), naming each problem, when
  * a file includes a folder its folder's row does not list
    (FILE:LINE: folder A includes folder B via "..." (not allowed by ...'s layer table));
  * a folder holding source files is not in the table (a folder without a listed folder above
    it, or a new subfolder of a folder whose subfolders are listed one by one, like kernels/);
  * the table lists a folder that does not exist, or names an unlisted folder in a row;
  * the table is missing or malformed.
Hidden folders and the root-anchored folders .gitignore ignores (/build*/ and the like) are not
searched for source folders. --graph prints which folder includes which (and how often) instead
of checking: the starting point when the table has to change. Exit 2: bad arguments.
"""

import argparse
import fnmatch
import os
import re
import sys
from collections import defaultdict

kDoc = os.path.join("docs", "ARCHITECTURE.md")
kSection = "## Layers"
kSourceExtensions = (".hpp", ".cpp", ".cu", ".cuh", ".h")
# The include directories every target gets (CMakeLists.txt: selfspec_options), in the order the
# compiler searches them after the including file's own folder.
kIncludeDirs = ("src", ".")
kAny = "*"
kNothing = ("", "-", "\u2014", "nothing", "none")
kInclude = re.compile(r'#\s*include\s*"([^"\n]+)"')


class TableError(Exception):
    pass


def norm_folder(name):
    name = name.strip().strip("`").strip()
    while name.endswith("/"):
        name = name[:-1]
    return name


def split_row(line):
    cells = line.strip()
    if cells.startswith("|"):
        cells = cells[1:]
    if cells.endswith("|"):
        cells = cells[:-1]
    return [cell.strip() for cell in cells.split("|")]


def parse_table(doc_path):
    """{folder: set of folders it may include, or None for any}, from the Layers section."""
    try:
        with open(doc_path, encoding="utf-8") as doc:
            lines = doc.read().splitlines()
    except OSError as error:
        raise TableError(f"{doc_path}: cannot read: {error.strerror}")
    start = next((i for i, line in enumerate(lines) if line.strip() == kSection), None)
    if start is None:
        raise TableError(f"{doc_path}: no '{kSection}' section")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    header = None
    for i in range(start + 1, end):
        if lines[i].lstrip().startswith("|"):
            cells = [cell.lower() for cell in split_row(lines[i])]
            if cells[:2] == ["folder", "may include"]:
                header = i
                break
    if header is None:
        raise TableError(f"{doc_path}: no '| folder | may include |' table in '{kSection}'")
    if header + 1 >= end or not re.fullmatch(r"[\s|:-]+", lines[header + 1]):
        raise TableError(f"{doc_path}:{header + 2}: the layer table has no |---|---| line")
    table = {}
    row_line = {}
    for i in range(header + 2, end):
        if not lines[i].lstrip().startswith("|"):
            break
        cells = split_row(lines[i])
        if len(cells) < 2:
            raise TableError(f"{doc_path}:{i + 1}: a layer-table row needs two cells")
        folder = norm_folder(cells[0])
        if not folder or folder.startswith("/") or ".." in folder.split("/"):
            raise TableError(f"{doc_path}:{i + 1}: bad folder '{cells[0]}'")
        if folder in table:
            raise TableError(f"{doc_path}:{i + 1}: {folder} is listed twice "
                             f"(first at line {row_line[folder]})")
        entries = [norm_folder(entry) for entry in cells[1].split(",")]
        entries = [entry for entry in entries if entry.lower() not in kNothing]
        table[folder] = None if kAny in entries else set(entries)
        row_line[folder] = i + 1
    if not table:
        raise TableError(f"{doc_path}:{header + 1}: the layer table has no rows")
    errors = []
    for folder, allowed in table.items():
        for entry in sorted(allowed or ()):
            if entry not in table:
                errors.append(f"{doc_path}:{row_line[folder]}: {folder} may include '{entry}', "
                              "which is not a folder of the table")
    if errors:
        raise TableError("\n".join(errors))
    return table


def owner(rel_dir, folders):
    """The longest listed folder that is rel_dir or above it, or None."""
    best = None
    for folder in folders:
        if rel_dir == folder or rel_dir.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def ignored_dirs(root):
    """Top-level patterns ('/build*/') and names anywhere ('__pycache__/') .gitignore ignores."""
    anchored, anywhere = [], []
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as ignore:
            for line in ignore:
                line = line.strip()
                if not line or line.startswith(("#", "!")) or not line.endswith("/"):
                    continue
                pattern = line.rstrip("/")
                if pattern.startswith("/"):
                    if "/" not in pattern[1:]:
                        anchored.append(pattern[1:])
                elif "/" not in pattern:
                    anywhere.append(pattern)
    except OSError:
        pass
    return anchored, anywhere


def source_dirs(root):
    """Every folder (relative, '/'-separated) that directly holds a source file."""
    anchored, anywhere = ignored_dirs(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        top = rel == "."
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".")
            and not any(fnmatch.fnmatch(d, p) for p in anywhere)
            and not (top and any(fnmatch.fnmatch(d, p) for p in anchored)))
        if any(name.endswith(kSourceExtensions) for name in filenames):
            found.append(rel)
    return found


def drift(root, table):
    """Errors for listed folders that do not exist and source folders the table misses."""
    errors = []
    for folder in sorted(table):
        if not os.path.isdir(os.path.join(root, folder)):
            errors.append(f"{folder}: listed in {kDoc}'s layer table, but there is no such folder")
    for rel in source_dirs(root):
        above = owner(rel, table)
        where = "the repository root" if rel == "." else rel
        if above is None:
            errors.append(f"{where}: holds source files, but no folder of {kDoc}'s layer table "
                          "covers it (add a row)")
            continue
        if above == rel:
            continue
        listed_below = sorted(f for f in table if f.startswith(above + "/"))
        if listed_below:
            errors.append(f"{rel}: holds source files, but {kDoc}'s layer table lists "
                          f"{above}'s subfolders one by one ({', '.join(listed_below)}) "
                          "and not this one (add a row)")
    return errors


def code_lines(text):
    """(line number, line) for each line, with comments and literals blanked out."""
    out = []
    in_block = False
    raw_end = None  # the ')delim"' that closes the raw string literal we are in
    for number, line in enumerate(text.split("\n"), 1):
        kept = []
        i = 0
        n = len(line)
        while i < n:
            if raw_end is not None:
                close = line.find(raw_end, i)
                if close < 0:
                    i = n
                    break
                i = close + len(raw_end)
                raw_end = None
                continue
            if in_block:
                close = line.find("*/", i)
                if close < 0:
                    i = n
                    break
                i = close + 2
                in_block = False
                kept.append(" ")
                continue
            c = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if c == '"':
                raw = re.search(r'(?:u8|[uUL])?R$', line[max(0, i - 3):i])
                if raw and (i - len(raw.group(0)) == 0
                            or not (line[i - len(raw.group(0)) - 1].isalnum()
                                    or line[i - len(raw.group(0)) - 1] == "_")):
                    open_paren = line.find("(", i + 1)
                    if open_paren >= 0:
                        raw_end = ")" + line[i + 1:open_paren] + '"'
                        i = open_paren + 1
                        continue
                # An ordinary string: kept (an include's path is one), up to its closing quote.
                j = i + 1
                while j < n and line[j] != '"':
                    j += 2 if line[j] == "\\" else 1
                kept.append(line[i:j + 1])
                i = j + 1
                continue
            if c == "'":
                before = re.search(r"[A-Za-z0-9_]+$", line[:i])
                if before is None or before.group(0) in ("L", "u", "U", "u8"):
                    j = i + 1
                    while j < n and line[j] != "'":
                        j += 2 if line[j] == "\\" else 1
                    kept.append("' '")
                    i = j + 1
                    continue
                # A digit separator (1'000): part of the number.
            kept.append(c)
            i += 1
        out.append((number, "".join(kept)))
    return out


def includes(path):
    """(line number, quoted include) for each #include "..." outside comments."""
    with open(path, encoding="utf-8", errors="replace") as source:
        text = source.read()
    found = []
    for number, line in code_lines(text):
        match = kInclude.match(line.lstrip())
        if match and line.lstrip().startswith("#"):
            found.append((number, match.group(1)))
    return found


def resolve(root, rel_dir, target, folders):
    """The listed folder an include from rel_dir of `target` lands in, or None (outside)."""
    candidates = [os.path.join(rel_dir, target)] + [os.path.join(d, target) for d in kIncludeDirs]
    candidates = [os.path.normpath(c).replace(os.sep, "/") for c in candidates]
    candidates = [c for c in candidates if c != ".." and not c.startswith("../")]
    for candidate in candidates:
        if os.path.isfile(os.path.join(root, candidate)):
            return owner(os.path.dirname(candidate), folders)
    # No such file (yet): the first place it could be that a listed folder covers. A path with a
    # folder in it is meant for the include directories; a bare name for the including folder.
    if "/" in target:
        candidates = candidates[1:] + candidates[:1]
    for candidate in candidates:
        place = owner(os.path.dirname(candidate), folders)
        if place is not None:
            return place
    return None


def scan(root, table):
    """Yields (file, line, its folder, the include, the folder it includes) for every include."""
    folders = list(table)
    seen = set()
    for folder in sorted(table):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith(kSourceExtensions):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel in seen:
                    continue
                seen.add(rel)
                rel_dir = os.path.dirname(rel)
                mine = owner(rel_dir, folders)
                for number, target in includes(path):
                    theirs = resolve(root, rel_dir, target, folders)
                    if theirs is not None:
                        yield rel, number, mine, target, theirs


def main(argv=None):
    default_root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "..", ".."))
    parser = argparse.ArgumentParser(
        description="Check every quoted #include against the layer table (\"| folder | may "
                    "include |\") in docs/ARCHITECTURE.md's Layers section, and that the table "
                    "lists exactly the source folders there are. Exit 0: clean; 1: violations "
                    "(each printed as FILE:LINE: ...) or a missing/malformed table; 2: bad "
                    "arguments.")
    parser.add_argument("--root", default=default_root,
                        help="repository root holding docs/ARCHITECTURE.md and the source "
                             "folders (default: %(default)s)")
    parser.add_argument("--graph", action="store_true",
                        help="print which folder includes which (with counts and whether the "
                             "table allows it) instead of checking")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        parser.error(f"--root {args.root}: not a directory")

    doc = os.path.join(root, kDoc)
    try:
        table = parse_table(doc)
    except TableError as error:
        print(f"check_layers: {error}", file=sys.stderr)
        return 1

    missing = {f for f in table if not os.path.isdir(os.path.join(root, f))}
    if args.graph:
        counts = defaultdict(lambda: defaultdict(int))
        for _, _, mine, _, theirs in scan(root, {f: a for f, a in table.items()
                                                 if f not in missing}):
            if theirs != mine:
                counts[mine][theirs] += 1
        for mine in sorted(counts):
            allowed = table[mine]
            row = ", ".join(f"{theirs} {count}" + ("" if allowed is None or theirs in allowed
                                                   else " (NOT ALLOWED)")
                            for theirs, count in sorted(counts[mine].items()))
            print(f"{mine} -> {row}")
        return 0

    problems = drift(root, table)
    files, checked, violations = set(), 0, []
    for rel, number, mine, target, theirs in scan(root, {f: a for f, a in table.items()
                                                         if f not in missing}):
        files.add(rel)
        checked += 1
        allowed = table[mine]
        if theirs == mine or allowed is None or theirs in allowed:
            continue
        violations.append(f"{rel}:{number}: folder {mine} includes folder {theirs} via "
                          f"\"{target}\" (not allowed by {kDoc}'s layer table)")
    for line in violations + problems:
        print(line)
    if violations or problems:
        print(f"check_layers: FAILED: {len(violations)} disallowed include(s), {len(problems)} "
              f"table/folder mismatch(es) ({kDoc}, section '{kSection}')", file=sys.stderr)
        return 1
    print(f"check_layers: OK: {len(table)} folders, {checked} quoted includes in {len(files)} "
          f"files agree with {kDoc}'s layer table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
