"""The step logs in OUTDIR/logs/: trimmed to their beginning and end, their last lines shown."""

import os

LOG_LIMIT = 160 * 1024  # bytes of a step log kept: its first quarter and its end


def trim_file(path, limit=LOG_LIMIT):
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size <= limit:
        return
    with open(path, "rb") as f:
        head = f.read(limit // 4)
        f.seek(size - (limit - limit // 4))
        tail = f.read()
    with open(path, "wb") as f:
        f.write(head)
        f.write(f"\n\n[... {size - len(head) - len(tail)} bytes cut by check.py ...]\n\n".encode())
        f.write(tail)


def tail_lines(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""
