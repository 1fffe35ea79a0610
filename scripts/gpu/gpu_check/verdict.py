"""The run's outcome: check.sh's exit codes (scripts/gpu/check.py says what each means), the result
word the reports give each, and the verdict that picks one from the steps so far."""

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_BUILD, EXIT_INCOMPLETE = 0, 1, 2, 3, 4, 5
RESULTS = {
    EXIT_PASSED: "passed",
    EXIT_FAILED: "failed",
    EXIT_NO_DEVICE: "no device",
    EXIT_BUILD: "build failed",
    EXIT_INCOMPLETE: "incomplete",
}


def verdict(c):
    """(exit code, summary) from the steps of the Checker c so far."""
    failed = [s["name"] for s in c.steps if s["status"] == "failed"]
    not_run = [s["name"] for s in c.steps if s["status"] == "not run"]
    if c.build_failed:
        return EXIT_BUILD, "the kit, configuration or build failed: " + ", ".join(failed)
    if not c.device["present"]:
        return EXIT_NO_DEVICE, ("no device: " + c.device.get("how", "")
                                + "; the GPU checks did not run")
    if failed:
        return EXIT_FAILED, "failed: " + ", ".join(failed)
    if not_run:
        return EXIT_INCOMPLETE, "incomplete, not run: " + ", ".join(not_run)
    return EXIT_PASSED, "every check passed"
