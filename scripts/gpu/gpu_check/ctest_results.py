"""Each test's outcome in a ctest run: from its JUnit XML (--output-junit), else from its stdout."""

import re
import xml.etree.ElementTree as ET


def parse_junit(path):
    """[{name, outcome, time_s, detail (not when passed)}], or None without a readable file."""
    tests = []
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    for case in root.iter("testcase"):
        outcome = junit_outcome(case)
        test = {"name": case.get("name"), "outcome": outcome,
                "time_s": float(case.get("time") or 0.0)}
        if outcome != "passed":
            test["detail"] = gtest_detail(case.findtext("system-out") or "")
        tests.append(test)
    return tests


def junit_outcome(case):
    """passed, failed, skipped or not run."""
    status = case.get("status", "run")
    skipped = case.find("skipped")
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if skipped is not None or status in ("notrun", "disabled"):
        # CTest marks a test that skipped itself (SKIP_REGULAR_EXPRESSION, SKIP_RETURN_CODE)
        # and one it could not start alike ("notrun"); the message tells them apart.
        message = (skipped.get("message", "") if skipped is not None else "").lower()
        return "skipped" if "skip" in message or status == "disabled" else "not run"
    if status == "fail":
        return "failed"
    return "passed"


def gtest_detail(output):
    """The reason of a skip or the first failure in a GoogleTest output (a few lines)."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Skipped"):
            return " ".join(x.strip() for x in lines[i:i + 2])[:400]
        if "Failure" in line:
            return " ".join(x.strip() for x in lines[i:i + 4])[:400]
    return " ".join(x.strip() for x in lines[-3:])[:400]


def parse_ctest_stdout(text):
    """[{name, outcome}] from ctest's progress lines."""
    tests = []
    for line in text.splitlines():
        m = re.match(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*(\*{0,3}[A-Za-z ]+?)\s+[\d.]+ sec",
                     line)
        if m:
            word = m.group(2).strip("* ").lower()
            outcome = {"passed": "passed", "skipped": "skipped", "not run": "not run"}.get(
                word, "failed")
            tests.append({"name": m.group(1), "outcome": outcome})
    return tests
