"""Evicting data files from the OS page cache before a cold run.

posix_fadvise(DONTNEED) on each data file drops its cached pages: no privilege needed, and the
engines' own code stays in memory (a cold run measures the data, not reloading chDB's library).
The probe checks with fincore (util-linux) that this works here; if it does not, it falls back
to `echo 3 > /proc/sys/vm/drop_caches` (root only, drops everything); if neither works, a
"cold" run is only the first run, and every report says so.
"""
import os
import shutil
import subprocess
import tempfile

PROBE_BYTES = 4 << 20


class PageCache:
    def __init__(self, folder):
        os.makedirs(folder, exist_ok=True)
        self.method, self.description = _probe(folder)

    @property
    def works(self):
        return self.method is not None

    def evict(self, paths):
        if self.method == "fadvise":
            for path in paths:
                drop_from_page_cache(path)
        elif self.method == "drop_caches":
            _drop_caches()


def drop_from_page_cache(path):
    """The file's pages out of the page cache; written back first, as dirty pages stay."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def _resident_bytes(path):
    """Bytes of the file in the page cache, or None when fincore is not installed."""
    if shutil.which("fincore") is None:
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout.split() else None


def _probe(folder):
    with tempfile.NamedTemporaryFile(dir=folder, prefix="cache-probe-") as f:
        f.write(os.urandom(PROBE_BYTES))
        f.flush()
        os.fsync(f.fileno())
        with open(f.name, "rb") as g:
            g.read()
        if _resident_bytes(f.name) is None:
            return "fadvise", ("cold runs: data files evicted from the page cache with "
                               "posix_fadvise(DONTNEED) before each run (not verified: no fincore)")
        drop_from_page_cache(f.name)
        if _resident_bytes(f.name) == 0:
            return "fadvise", ("cold runs: data files evicted from the page cache with "
                               "posix_fadvise(DONTNEED) before each run (checked with fincore)")
        try:
            _drop_caches()
        except OSError as e:
            return None, (f"cold runs: NOT cold. Evicting files did not work here and dropping "
                          f"the page cache is not permitted ({e.strerror}); a 'cold' run is "
                          f"only the first run of each query")
        if _resident_bytes(f.name) == 0:
            return "drop_caches", ("cold runs: the whole page cache dropped (echo 3 > "
                                   "/proc/sys/vm/drop_caches) before each run")
        return None, ("cold runs: NOT cold. Neither posix_fadvise nor drop_caches emptied the "
                      "page cache here; a 'cold' run is only the first run of each query")
