"""sanitizers.py: reading the reports of AddressSanitizer, UBSan and
LeakSanitizer that the programs under test leave in their logs.

A report fails the test, except a leak that is libfuse's own (below).
"""

import re

SAN_PATTERNS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer",
                "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")
# libfuse 3.14 keeps an INTERRUPT that arrives after its request was
# answered (a lock waiter killed just as its lock was granted) in a list
# that only a later request empties; a session that ends first leaks that
# request (128 bytes, and 48 of its channel) at exit. A LeakSanitizer
# report made only of leaks whose every frame past the allocator is in
# libfuse is that, not ours (our code is built with frame pointers, so a
# leak of ours shows our frames), and is not counted.
_LSAN_SECTION = re.compile(
    r"==\d+==ERROR: LeakSanitizer: detected memory leaks\n(.*?)"
    r"SUMMARY: AddressSanitizer: \d+ byte\(s\) leaked in \d+ allocation\(s\)\.\n?", re.S)


def _libfuse_only(section):
    frames = [ln.strip() for ln in section.splitlines() if re.match(r"\s+#\d+ ", ln)]
    ours = [f for f in frames if not f.startswith("#0 ")]
    return bool(ours) and all("libfuse3.so" in f for f in ours)


def drop_libfuse_leaks(text):
    """text without the LeakSanitizer reports that are libfuse's own (see
    above); (text, True if one was dropped)."""
    dropped = False

    def sub(m):
        nonlocal dropped
        if _libfuse_only(m.group(1)):
            dropped = True
            return ""
        return m.group(0)
    return _LSAN_SECTION.sub(sub, text), dropped


def _read(f):
    """The text of log f, None if it cannot be read."""
    try:
        return f.read_text(errors="replace")
    except OSError:
        return None


def only_libfuse_leaked(files):
    """True if the logs in files hold a libfuse leak (drop_libfuse_leaks)
    and no other sanitizer report: a process that failed at exit only
    because of libfuse's own leak."""
    dropped_any = False
    for f in files:
        text = _read(f)
        if text is None:
            continue
        rest, dropped = drop_libfuse_leaks(text)
        dropped_any |= dropped
        if any(p in rest for p in SAN_PATTERNS):
            return False
    return dropped_any


def scan_logs(logs):
    """Error strings for every sanitizer report in the files of directory
    logs (a program's log, or a san.<tag>.<pid> file of the runtime)."""
    errs = []
    for f in sorted(logs.iterdir()):
        text = _read(f)
        if text is None:
            continue
        sanlog = f.name.startswith("san.")
        text, _ = drop_libfuse_leaks(text)
        hits = [ln for ln in text.splitlines() if any(p in ln for p in SAN_PATTERNS)]
        if hits or (sanlog and text.strip("= \n")):
            errs.append(f"sanitizer report in {f}:\n" + "\n".join(text.splitlines()[:60]))
    return errs
