"""Tests scripts/dev/check_layers.py, the layer check of docs/ARCHITECTURE.md's table.

Each test builds a small fake repository in a temporary directory (a docs/ARCHITECTURE.md whose
"## Layers" section holds a "| folder | may include |" table, and a few folders of headers laid
out like the real tree: core/, kernels/cpu, src/model, src/decode) and runs the script on it with
--root: the clean tree passes; an upward include (src/model including "decode/decoder.hpp") fails
and names FILE:LINE; a source folder the table does not list, a listed folder that is gone, and a
new subfolder of a folder whose subfolders are listed one by one fail; includes in comments,
angle-bracket includes, and includes of files next to the includer are ignored or allowed.

    /usr/bin/python3 tests/architecture/check_layers_test.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kScript = os.path.join(kRepo, "scripts", "dev", "check_layers.py")

kDoc = """\
# fake — architecture

## Layers

Folders are layers.

| folder | may include |
|---|---|
| `core` | — |
| `kernels` | `core` |
| `kernels/cpu` | `core`, `kernels` |
| `src/model` | `core`, `kernels/cpu` |
| `src/decode` | `core`, `src/model` |
| `launch` | `core`, `src/model`, `src/decode` |
| `tests` | `*` |

## The next section

| folder | may include |
|---|---|
| `not/a/layer` | `core` |
"""

kFiles = {
    "core/error.hpp": "#pragma once\n#include <string>\n",
    "kernels/shared.hpp": '#pragma once\n#include "core/error.hpp"\n',
    "kernels/cpu/matmul.hpp": '#pragma once\n#include "kernels/shared.hpp"\n',
    "kernels/cpu/matmul.cpp": '#include "kernels/cpu/matmul.hpp"\n#include "matmul.hpp"\n',
    "src/model/kv_cache.hpp": ('#pragma once\n#include "core/error.hpp"\n'
                               '#include "kernels/cpu/matmul.hpp"\n'),
    "src/decode/decoder.hpp": '#pragma once\n#include "model/kv_cache.hpp"\n',
    "launch/main.cpp": '#include "decode/decoder.hpp"\n#include "launch/plan/cost.hpp"\n',
    "launch/plan/cost.hpp": '#pragma once\n#include "model/kv_cache.hpp"\n',
    "tests/unit/decoder_test.cpp": '#include "decode/decoder.hpp"\n#include "launch/plan/cost.hpp"\n',
    "scripts/tool.py": "print('not C++')\n",
    "build/generated/config.hpp": '#include "decode/decoder.hpp"\n',  # ignored: .gitignore
    ".cache/x.cpp": "int x;\n",  # ignored: hidden
}


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check_layers_test_")
        self.addCleanup(shutil.rmtree, self.root)
        self.write("docs/ARCHITECTURE.md", kDoc)
        self.write(".gitignore", "/build*/\n__pycache__/\n")
        for path, text in kFiles.items():
            self.write(path, text)

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as out:
            out.write(text)

    def append(self, path, text):
        with open(os.path.join(self.root, path), "a", encoding="utf-8") as out:
            out.write(text)

    def check(self, *extra):
        run = subprocess.run([sys.executable, kScript, "--root", self.root, *extra],
                             capture_output=True, text=True, timeout=60)
        return run.returncode, run.stdout + run.stderr

    def assert_passes(self):
        code, output = self.check()
        self.assertEqual(code, 0, output)
        self.assertIn("check_layers: OK", output)
        return output

    def assert_fails(self, *expected):
        code, output = self.check()
        self.assertEqual(code, 1, output)
        for text in expected:
            self.assertIn(text, output)
        return output

    def test_clean_tree_passes(self):
        output = self.assert_passes()
        self.assertIn("7 folders", output)

    def test_upward_include_fails_and_names_file_and_line(self):
        self.write("src/model/x.hpp",
                   '#pragma once\n#include "core/error.hpp"\n\n#include "decode/decoder.hpp"\n')
        output = self.assert_fails(
            'src/model/x.hpp:4: folder src/model includes folder src/decode via '
            '"decode/decoder.hpp" (not allowed by docs/ARCHITECTURE.md\'s layer table)')
        self.assertEqual(output.count("folder src/model includes"), 1, output)

    def test_include_of_a_file_that_does_not_exist_still_counts(self):
        self.append("kernels/cpu/matmul.cpp", '  #  include "model/planned.hpp"  // later\n')
        self.assert_fails("kernels/cpu/matmul.cpp:3: folder kernels/cpu includes folder "
                          "src/model via \"model/planned.hpp\"")

    def test_subfolders_belong_to_the_deepest_listed_folder(self):
        # kernels/cpu is not kernels: the shared header may not include the CPU kernels.
        self.append("kernels/shared.hpp", '#include "kernels/cpu/matmul.hpp"\n')
        # launch/plan is launch's, which may include src/decode.
        self.append("launch/plan/cost.hpp", '#include "decode/decoder.hpp"\n')
        output = self.assert_fails("kernels/shared.hpp:3: folder kernels includes folder "
                                   "kernels/cpu")
        self.assertNotIn("launch/plan", output)

    def test_unlisted_source_folder_fails(self):
        self.write("src/search/search.hpp", '#pragma once\n#include "decode/decoder.hpp"\n')
        self.assert_fails("src/search: holds source files, but no folder of "
                          "docs/ARCHITECTURE.md's layer table covers it")

    def test_new_subfolder_of_a_split_folder_fails(self):
        self.write("kernels/metal/matmul.hpp", '#pragma once\n#include "core/error.hpp"\n')
        self.assert_fails("kernels/metal: holds source files, but docs/ARCHITECTURE.md's layer "
                          "table lists kernels's subfolders one by one (kernels/cpu)")

    def test_listed_folder_that_is_gone_fails(self):
        shutil.rmtree(os.path.join(self.root, "launch"))
        self.assert_fails("launch: listed in docs/ARCHITECTURE.md's layer table, but there is "
                          "no such folder")

    def test_row_naming_an_unlisted_folder_fails(self):
        self.write("docs/ARCHITECTURE.md",
                   kDoc.replace("| `src/model` | `core`, `kernels/cpu` |",
                                "| `src/model` | `core`, `kernels/cpu`, `src/backend` |"))
        self.assert_fails("src/model may include 'src/backend', which is not a folder of the "
                          "table")

    def test_missing_table_fails(self):
        self.write("docs/ARCHITECTURE.md", "# fake\n\n## Layers\n\nNo table.\n\n## Next\n")
        self.assert_fails("no '| folder | may include |' table in '## Layers'")

    def test_comments_and_angle_brackets_are_ignored(self):
        self.append("src/model/kv_cache.hpp", textwrap.dedent("""\
            #include <decode/decoder.hpp>
            // #include "decode/decoder.hpp"
            /* #include "decode/decoder.hpp" */
            /*
            #include "decode/decoder.hpp"
            */
            int a = 1'000; const char* glob = "src/*.cpp"; char q = '"';
            const char* raw = R"x(
            #include "decode/decoder.hpp"
            )x";
            #include "kv_cache.hpp"
            """))
        self.assert_passes()

    def test_code_after_a_closed_comment_is_still_checked(self):
        self.append("src/model/kv_cache.hpp",
                    '/* one\n   two */ int b;\nconst char* s = "/*";\n#include "decode/decoder.hpp"\n')
        self.assert_fails("src/model/kv_cache.hpp:7: folder src/model includes folder src/decode")

    def test_tests_may_include_anything(self):
        self.append("tests/unit/decoder_test.cpp", '#include "kernels/shared.hpp"\n')
        self.assert_passes()

    def test_graph_prints_the_includes(self):
        self.write("src/model/x.hpp", '#include "decode/decoder.hpp"\n')
        code, output = self.check("--graph")
        self.assertEqual(code, 0, output)
        self.assertIn("src/model -> core 1, kernels/cpu 1, src/decode 1 (NOT ALLOWED)", output)

    def test_bad_arguments_print_usage(self):
        code, output = self.check("--no-such-option")
        self.assertEqual(code, 2, output)
        self.assertIn("usage:", output)
        code, output = self.check("--root", os.path.join(self.root, "nowhere"))
        self.assertEqual(code, 2, output)
        self.assertIn("not a directory", output)


if __name__ == "__main__":
    unittest.main()
