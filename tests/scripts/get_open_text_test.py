"""Tests scripts/get_open_text.py, the helper of scripts/get-open-text.sh.

Made-up inputs in temporary folders: HTML pages (content root, skipped navigation and code,
list items, entities, short pages left out, include/exclude patterns), a Jargon File-like text
(chapters, lexicon letters, appendix, table of contents and front matter left out), a small
"standard library" (test suites, generated and non-UTF-8 files left out), the capped selection
(equal shares, unused share passed on, SOURCES.json), meta, fingerprint and the command line's
exit codes. Then the script itself on this python's real standard library (`code`, offline): the
corpus, its stamp, reuse, and refusal of a folder it did not make. Standard library only.

    python3 tests/scripts/get_open_text_test.py
"""
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "get_open_text.py")
kScript = os.path.join(kRepo, "scripts", "get-open-text.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts"))

import get_open_text as got  # noqa: E402

kWords = ("the hacker wrote a small program that reads the manual and prints every paragraph "
          "it finds there before going home for the night ")


def write(path, text, mode="w"):
    """Writes text (str, or bytes with mode "wb") to path, making its folders."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


def run_quietly(function, *args):
    """function(*args) with its stderr captured; returns what it printed there."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        function(*args)
    return err.getvalue()


def read(path):
    """The UTF-8 text of the file at path."""
    with open(path, encoding="utf-8") as f:
        return f.read()


class CleanTest(unittest.TestCase):
    def test_clean(self):
        text = "Caf\u0065\u0301\u00a0ok\u200b \t\n\n\n\nnext\x07 line   \n\ufeff"
        self.assertEqual(got.clean(text), "Caf\u00e9 ok\n\nnext line\n")

    def test_read_text_falls_back_to_cp1252(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.txt")
            write(path, b"caf\xe9 \x93quoted\x94", "wb")
            self.assertEqual(got.read_text(path), "caf\u00e9 \u201cquoted\u201d")


class HtmlTest(unittest.TestCase):
    def page(self, body, head="<title>t</title>"):
        return f"<html><head>{head}</head><body>{body}</body></html>"

    def test_html_to_text(self):
        body = ('<div class="sphinxsidebar"><p>sidebar text</p></div>'
                '<div class="body" role="main"><h1>Title<a class="headerlink">¶</a></h1>'
                '<p>First &amp; <b>bold</b>\n   words<br>after break</p>'
                '<pre>code block</pre><table><tr><td>cell</td></tr></table>'
                '<ul><li>one</li><li><p>two</p></li></ul><p>  </p><p>...</p>'
                '<div class="highlight">x = 1</div><img src="a.png"><p>last</p></div>')
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.html")
            write(path, self.page(body))
            self.assertEqual(got.html_to_text(path),
                             "Title\n\nFirst & bold words after break\n\n- one\n\n- two\n\n"
                             "last\n")

    def test_content_root_order(self):
        builder = got.TreeBuilder()
        builder.feed('<body><div id="content"><main><p>in main</p></main></div></body>')
        builder.close()
        self.assertEqual(got.content_root(builder.root).tag, "main")
        builder = got.TreeBuilder()
        builder.feed('<body><div id="content"><p>in content</p></div></body>')
        builder.close()
        self.assertEqual(got.content_root(builder.root).attrs["id"], "content")

    def test_end_tag_closes_unclosed_children(self):
        builder = got.TreeBuilder()
        builder.feed("<div><p>one<span>two</div><p>three</p>")
        builder.close()
        top = [c.tag for c in builder.root.children]
        self.assertEqual(top, ["div", "p"])

    def test_cmd_html(self):
        long_text = kWords * 5
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
            write(os.path.join(src, "guide.html"), self.page(f"<p>{long_text}</p>"))
            write(os.path.join(src, "sub", "deep.htm"), self.page(f"<p>{long_text}</p>"))
            write(os.path.join(src, "index.html"), self.page(f"<p>{long_text}</p>"))
            write(os.path.join(src, "short.html"), self.page("<p>too short</p>"))
            write(os.path.join(src, "notes.txt"), long_text)
            err = run_quietly(got.cmd_html, src, out, r".*\.html?", "!index\\.html")
            self.assertEqual(err, "2 documents, 1 pages with too little text left out\n")
            self.assertEqual(sorted(os.listdir(out)), ["guide.txt", "sub"])
            self.assertEqual(os.listdir(os.path.join(out, "sub")), ["deep.txt"])
            self.assertEqual(read(os.path.join(out, "guide.txt")), long_text.strip() + "\n")
            with self.assertRaises(SystemExit) as caught:
                run_quietly(got.cmd_html, src, os.path.join(tmp, "none"), "nothing")
            self.assertEqual(caught.exception.code, f"no document converted from {src}")


kJargon = """The Jargon File, front matter that is left out entirely, however long it may be.

Table of Contents

     Part I. Jargon Lexicon

Chapter\u00a01.\u00a0Introduction

Table of Contents

Of Slang, Jargon, and Techspeak
Revision History

   {WORDS}
   {WORDS}

Chapter 2. Jargon Construction

{WORDS} {cross reference} and
{WORDS}

     Part II. The Jargon Lexicon

   :ace: n. {WORDS}
   {WORDS}

   :Abort: v. {WORDS}

   :bogon: n. Too short a letter to be kept.

   :1TBS: n. {WORDS} {WORDS}

Appendix A. Hacker Folklore

{WORDS}
{WORDS} {WORDS}

Bibliography

   {WORDS} {WORDS} {WORDS}
""".replace("{WORDS}", (kWords * 2).strip())


class JargonTest(unittest.TestCase):
    def test_cmd_jargon(self):
        with tempfile.TemporaryDirectory() as tmp:
            txt, out = os.path.join(tmp, "jargon.txt"), os.path.join(tmp, "out")
            write(txt, kJargon)
            err = run_quietly(got.cmd_jargon, txt, out)
            self.assertEqual(err, "6 documents\n")
            # lexicon-B is too short (< MIN_DOC_CHARS) and left out
            self.assertEqual(sorted(os.listdir(out)),
                             ["appendix-a.txt", "chapter-1.txt", "chapter-2.txt",
                              "lexicon-0.txt", "lexicon-A.txt"])
            chapter1 = read(os.path.join(out, "chapter-1.txt"))
            self.assertTrue(chapter1.startswith("Chapter 1. Introduction\n\n" + kWords))
            self.assertNotIn("Revision History", chapter1)  # the chapter's table of contents
            self.assertNotIn("front matter", chapter1)
            chapter2 = read(os.path.join(out, "chapter-2.txt"))
            self.assertIn(" cross reference and ", chapter2)  # braces gone, lines unwrapped
            lexicon_a = read(os.path.join(out, "lexicon-A.txt"))
            self.assertTrue(lexicon_a.startswith(":ace: n. "))
            self.assertIn("\n\n:Abort: v. ", lexicon_a)
            self.assertTrue(read(os.path.join(out, "lexicon-0.txt")).startswith(":1TBS: n."))
            self.assertNotIn("Bibliography", read(os.path.join(out, "appendix-a.txt")))

    def test_nothing_found(self):
        with tempfile.TemporaryDirectory() as tmp:
            txt = os.path.join(tmp, "j.txt")
            write(txt, "no headings here\n")
            with self.assertRaises(SystemExit) as caught:
                run_quietly(got.cmd_jargon, txt, os.path.join(tmp, "out"))
            self.assertEqual(caught.exception.code, f"no chapter or lexicon entry found in {txt}")


class StdlibTest(unittest.TestCase):
    def test_cmd_stdlib(self):
        with tempfile.TemporaryDirectory() as tmp:
            lib, out = os.path.join(tmp, "lib"), os.path.join(tmp, "out")
            write(os.path.join(lib, "os.py"), "import sys\n")
            write(os.path.join(lib, "json", "__init__.py"), "# json\n")
            write(os.path.join(lib, "json", "tests", "t.py"), "x = 1\n")
            write(os.path.join(lib, "test", "test_os.py"), "x = 1\n")
            write(os.path.join(lib, "site-packages", "pkg.py"), "x = 1\n")
            write(os.path.join(lib, "config-3.11-x86_64-linux-gnu", "c.py"), "x = 1\n")
            write(os.path.join(lib, "_sysconfigdata__linux.py"), "x = 1\n")
            write(os.path.join(lib, "cp1.py"), '""" Python Character Mapping Codec generated '
                                               'from gencodec.py """\n')
            write(os.path.join(lib, "tok.py"), "# Auto-generated by Tools/x\n")
            write(os.path.join(lib, "latin.py"), b"s = '\xe9'\n", "wb")
            write(os.path.join(lib, "empty.py"), "\n")
            write(os.path.join(lib, "README.txt"), "not python\n")
            err = run_quietly(got.cmd_stdlib, lib, out)
            self.assertEqual(err, "2 files, 3 generated or non-UTF-8 files left out\n")
            found = sorted(os.path.relpath(os.path.join(d, n), out)
                           for d, _, names in os.walk(out) for n in names)
            self.assertEqual(found, ["json/__init__.py", "os.py"])
            with self.assertRaises(SystemExit) as caught:
                run_quietly(got.cmd_stdlib, os.path.join(lib, "test", "x"), out)
            self.assertIn("no .py file found under", caught.exception.code)


class SelectTest(unittest.TestCase):
    def make_source(self, staged, meta_dir, name, sizes):
        for i, size in enumerate(sizes):
            write(os.path.join(staged, name, f"d{i}.txt"), "x" * size)
        got.cmd_meta(name, "debian", f"{name}-pkg", "1.0", "MIT",
                     os.path.join(meta_dir, f"{name}.json"))

    def test_cmd_select(self):
        with tempfile.TemporaryDirectory() as tmp:
            staged, meta, out = (os.path.join(tmp, d) for d in ("staged", "meta", "out"))
            os.makedirs(meta)
            os.makedirs(out)
            self.make_source(staged, meta, "small", [100, 50])
            self.make_source(staged, meta, "big", [400] * 10)
            self.make_source(staged, meta, "mid", [300, 300, 300])
            # 1500 bytes: small takes its 150, mid its share 675 (600 fit), big the rest 675 (600)
            err = run_quietly(got.cmd_select, staged, meta, out, "1500")
            self.assertEqual(err.count("\n"), 3)
            self.assertIn("big: 1 of 10 files", err)
            with open(os.path.join(out, "SOURCES.json"), encoding="utf-8") as f:
                summary = json.load(f)
            by_name = {s["name"]: s for s in summary}
            self.assertEqual([s["name"] for s in summary], ["big", "mid", "small"])
            self.assertEqual(by_name["small"], {
                "name": "small", "origin": "debian", "package": "small-pkg", "version": "1.0",
                "license": "MIT", "files": 2, "bytes": 150, "available_files": 2,
                "available_bytes": 150})
            self.assertEqual((by_name["mid"]["files"], by_name["mid"]["bytes"]), (2, 600))
            self.assertEqual((by_name["big"]["files"], by_name["big"]["bytes"]), (1, 400))
            self.assertEqual(len(os.listdir(os.path.join(out, "mid"))), 2)
            # same inputs, same choice: the order is the sha1 of the relative path
            order = sorted(os.listdir(os.path.join(staged, "mid")),
                           key=lambda r: hashlib.sha1(r.encode()).hexdigest())
            self.assertEqual(sorted(os.listdir(os.path.join(out, "mid"))), sorted(order[:2]))


class SmallStepsTest(unittest.TestCase):
    def test_meta(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m.json")
            got.cmd_meta("python-stdlib", "python", "python 3.11 at /x", "3.11", "PSF-2.0", out)
            with open(out) as f:
                text = f.read()
            self.assertEqual(text, '{"name": "python-stdlib", "origin": "python", "package": '
                                   '"python 3.11 at /x", "version": "3.11", "license": '
                                   '"PSF-2.0"}')

    def test_fingerprint(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            write(a, "one")
            write(b, "two")
            self.assertEqual(got.fingerprint(a), hashlib.sha256(b"one").hexdigest()[:16])
            self.assertEqual(got.fingerprint(a, b), hashlib.sha256(b"onetwo").hexdigest()[:16])


class CommandLineTest(unittest.TestCase):
    def run_helper(self, *args):
        return subprocess.run([sys.executable, kHelper, *args], capture_output=True, text=True,
                              timeout=60)

    def test_commands(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = os.path.join(tmp, "a")
            write(a, "one")
            done = self.run_helper("fingerprint", a)
            self.assertEqual((done.returncode, done.stdout),
                             (0, hashlib.sha256(b"one").hexdigest()[:16] + "\n"))
            done = self.run_helper("meta", "n", "o", "p", "v", "l", os.path.join(tmp, "m.json"))
            self.assertEqual(done.returncode, 0, done.stderr)
            done = self.run_helper("jargon", a, os.path.join(tmp, "out"))
            self.assertEqual(done.returncode, 1)
            self.assertIn("no chapter or lexicon entry found in", done.stderr)
            self.assertEqual(self.run_helper("nonsense").returncode, 2)
            self.assertEqual(self.run_helper("select", "too", "few").returncode, 2)
            self.assertEqual(self.run_helper().returncode, 2)


class ScriptTest(unittest.TestCase):
    """scripts/get-open-text.sh code, offline, on this python's own standard library."""

    def run_script(self, *args, env):
        return subprocess.run(["bash", kScript, *args], capture_output=True, text=True,
                              env=env, cwd="/", stdin=subprocess.DEVNULL, timeout=120)

    def test_code_corpus(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHON=sys.executable, XDG_CACHE_HOME=os.path.join(tmp, "c"),
                       TMPDIR=tmp)
            out = os.path.join(tmp, "corpus", "code")
            done = self.run_script("code", out, "--max-mb", "1", env=env)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.splitlines()[-1], out)
            with open(os.path.join(out, "SOURCES.json"), encoding="utf-8") as f:
                (source,) = json.load(f)
            self.assertEqual(source["name"], "python-stdlib")
            self.assertEqual(source["license"], "PSF-2.0")
            self.assertGreater(source["files"], 10)
            self.assertLessEqual(source["bytes"], 1 << 20)
            self.assertTrue(os.path.isfile(os.path.join(out, "python-stdlib", "os.py"))
                            or source["files"] < source["available_files"])
            with open(os.path.join(out, ".get-open-text.stamp")) as f:
                stamp = f.read().strip()
            with open(kScript, "rb") as f1, open(kHelper, "rb") as f2:
                sha = hashlib.sha256(f1.read() + f2.read()).hexdigest()[:16]
            self.assertEqual(stamp, f"corpus=code max_mb=1 python={sys.executable} script={sha}")
            self.assertEqual(os.listdir(os.path.join(tmp, "corpus")), ["code"])  # no scratch
            again = self.run_script("code", out, "--max-mb", "1", env=env)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn("is already built", again.stderr)
            foreign = os.path.join(tmp, "foreign")
            write(os.path.join(foreign, "mine.txt"), "x")
            refused = self.run_script("code", foreign, env=env)
            self.assertEqual(refused.returncode, 1)
            self.assertIn("was not made by this script", refused.stderr)
            bad = self.run_script("poetry", out, env=env)
            self.assertEqual(bad.returncode, 1)
            self.assertIn("unknown corpus 'poetry'", bad.stderr)


if __name__ == "__main__":
    unittest.main()
