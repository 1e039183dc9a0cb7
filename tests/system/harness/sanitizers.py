"""sanitizers.py: what the programs under test leave in their logs that
fails a test: a report of AddressSanitizer, UBSan, LeakSanitizer or
ThreadSanitizer (in a program's log or a san.<tag>.<pid> file of the
runtime), and an error line of podfs or podfsd (lib/log.c:
"YYYY-MM-DDTHH:MM:SS.mmmZ podfs: error: ...") or of libfuse ("fuse: ...") that the
test did not declare it expects (Env.expect_log).

No report is forgiven: libfuse's INTERRUPTs that used to leak at exit
are emptied by podfs itself (fs/loop.c), and a leak of libfuse's request
allocator is a request podfs never answered.
"""

import re

SAN_PATTERNS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer",
                "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")

# An error line: lib/log.c's format at level "error" (podfsd's fatal()
# too, and libfuse's own messages of that level in podfs), or a message
# libfuse writes itself (perror "fuse: writing device: ...").
ERROR_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S+: error: |^fuse: ")


def sanitizer_lines(text):
    """The lines of text that belong to a sanitizer report."""
    return [ln for ln in text.splitlines() if any(p in ln for p in SAN_PATTERNS)]


def _read(f):
    """The text of log f, None if it cannot be read."""
    try:
        return f.read_text(errors="replace")
    except OSError:
        return None


def scan_logs(logs, expected=()):
    """Error strings for every sanitizer report and every unexpected error
    line in the files of directory logs. expected: (regex, tag) pairs; an
    error line in the log of program `tag` (a prefix of the log's name,
    None: any) that re.search(regex) finds is expected."""
    errs = []
    for f in sorted(logs.iterdir()):
        text = _read(f)
        if text is None:
            continue
        if sanitizer_lines(text) or (f.name.startswith("san.") and text.strip("= \n")):
            errs.append(f"sanitizer report in {f}:\n" + "\n".join(text.splitlines()[:60]))
            continue
        bad = [ln for ln in text.splitlines() if ERROR_LINE.search(ln) and
               not any((tag is None or f.name.startswith(tag + ".")) and re.search(rx, ln)
                       for rx, tag in expected)]
        if bad:
            errs.append(f"error lines in {f} (a test that provokes one declares it with "
                        "env.expect_log):\n" + "\n".join(bad[:20]))
    return errs
