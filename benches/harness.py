#!/usr/bin/env python3
"""Quiver against DuckDB, chDB and DataFusion on the same Parquet files (run it via benches/run).

usage: benches/run [--quick | --full] [--scenario NAME ...] [--engines a,b,...] [--reps N]
                   [--s3-latency MS] [--s3-bandwidth MB_PER_S] [--minio-port PORT]

Runs the scenarios (benches/scenarios/), writes benches/results/<scenario>.md and .png and
results/summary.md, and prints the summary. A default or full run of every scenario with a
release build also writes the summary into benches/README.md. The quiver binary is $QUIVER_BIN,
else ${CARGO_TARGET_DIR:-~/.cache/quiver-target}/release/quiver, built (cargo build --release
-p quiver-cli) when missing; the bench runs a fresh copy of it, as installed.
"""
import argparse
import dataclasses
import datetime
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Import as the package `benches`, and tests/tpch as `tpch`; not this folder's modules bare.
sys.path[0] = REPO
sys.path.insert(1, os.path.join(REPO, "tests"))

from benches import data, engines, measure, report  # noqa: E402
from benches.cache import PageCache, drop_from_page_cache  # noqa: E402
from benches.scenarios import PENDING, SCENARIOS  # noqa: E402

RESULTS = os.path.join(REPO, "benches", "results")
README = os.path.join(REPO, "benches", "README.md")
README_BEGIN, README_END = "<!-- results:begin -->", "<!-- results:end -->"


@dataclasses.dataclass
class Mode:
    name: str
    sf: str            # TPC-H scale factor
    reps: int          # hot runs per query (the best counts)
    small_files: int   # files in scenario 4


MODES = {
    "quick": Mode("quick", "0.1", 1, 500),
    "default": Mode("default", "1", 3, 2000),
    "full": Mode("full", "10", 3, 5000),
}


class Bench:
    """What a scenario gets: the mode, the engines, and compare() to run one query on all."""

    def __init__(self, mode, engine_list, cache, results, options=None):
        self.mode, self.engines, self.cache, self.results = mode, engine_list, cache, results
        self.options = options  # the command line (scenario s3 reads its --s3-* flags)
        self.base = next((e for e in engine_list if e.name == "quiver"), engine_list[0])
        self.peers = [e for e in engine_list if e is not self.base]

    def views(self, tables, hive=(), files=False):
        """{engine name: statements} making each table (name -> glob) in every engine."""
        return {e.name: [statement for name, glob in tables.items()
                         for statement in e.view(name, glob, hive, files)]
                for e in self.engines}

    def compare(self, label, setup, sql, files, cold=True, threads=None, keys=None):
        """measure.compare on every engine; prints one progress line."""
        evict = (lambda: self.cache.evict(files)) if cold else None
        start = time.time()
        outcomes = measure.compare(self.engines, setup, sql, reference=engines.REFERENCE,
                                   reps=self.mode.reps, evict=evict, threads=threads, keys=keys)
        cells = "  ".join(f"{e.name} {_progress(outcomes[e.name])}" for e in self.engines)
        print(f"  {label}: {cells}  [{time.time() - start:.1f} s]", flush=True)
        return outcomes


def _progress(outcome):
    """cold/hot seconds, or the status when the times do not count."""
    if not outcome.ok:
        return outcome.status
    return "/".join(report.seconds(t) for t in (outcome.cold, outcome.hot) if t is not None)


def quiver_binary():
    """$QUIVER_BIN, else the release build, built here when it is missing."""
    if os.environ.get("QUIVER_BIN"):
        path = os.path.abspath(os.environ["QUIVER_BIN"])
        if not os.access(path, os.X_OK):
            sys.exit(f"bench: QUIVER_BIN={path} is not an executable")
        return path
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/quiver-target"))
    path = os.path.join(target, "release", "quiver")
    if not os.access(path, os.X_OK):
        print("bench: building the release quiver (about 20 minutes on 2 cores the first time)",
              flush=True)
        build = subprocess.run(["cargo", "build", "--release", "-p", "quiver-cli"], cwd=REPO,
                               env={**os.environ, "CARGO_TARGET_DIR": target})
        if build.returncode != 0:
            sys.exit("bench: building quiver failed")
    return path


def installed(binary, folder=None, name="quiver"):
    """A fresh copy of `binary`, out of the page cache, which the bench runs: `name` in
    bench-bin/`folder` (the build's kind unless given: benches/ab keeps two side by side).

    A user runs an installed command (`cargo install` copies it), and after a reboot its first
    process reads it back. A build that sat for a while is in no such state: the pages of its
    code that the kernel dropped and faults brought back are cached small, and each process of
    it spends milliseconds more mapping its code (docs/decisions.md, "The command keeps its
    own code cached in large folios").
    """
    folder = folder or ("debug" if "/debug/" in binary else "release")
    folder = os.path.join(data.ROOT, "bench-bin", folder)
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, name)
    fresh = copy + ".new"
    shutil.copyfile(binary, fresh)
    os.chmod(fresh, 0o755)
    drop_from_page_cache(fresh)
    os.replace(fresh, copy)
    return copy


def parse_args(argv):
    names = [s.NAME for s in SCENARIOS]
    parser = argparse.ArgumentParser(
        prog="benches/run", description="Quiver against DuckDB, chDB and DataFusion.",
        epilog="scenarios: " + ", ".join(names)
        + (f"; pending: {', '.join(PENDING)}" if PENDING else ""))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="TPC-H SF 0.1, 500 small files, 1 hot run (a few minutes)")
    size.add_argument("--full", action="store_true", help="TPC-H SF 10, 5000 small files")
    parser.add_argument("--scenario", action="append", choices=names, metavar="NAME",
                        help=f"run only this scenario (repeatable): {', '.join(names)}")
    parser.add_argument("--engines", default=",".join(engines.DEFAULT),
                        help=f"comma-separated, from {', '.join(engines.NAMES)} "
                             f"(DuckDB always runs: it is the reference)")
    parser.add_argument("--reps", type=int, help="hot runs per query (the best counts)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    s3 = parser.add_argument_group("scenario s3 (the proxy in front of MinIO)")
    s3.add_argument("--s3-latency", type=float, default=20, metavar="MS",
                    help="ms added before each request (default 20)")
    s3.add_argument("--s3-bandwidth", type=float, default=50, metavar="MB_PER_S",
                    help="cap per connection in MB/s, 0 for none (default 50)")
    s3.add_argument("--minio-port", type=int,
                    default=int(os.environ.get("QUIVER_BENCH_MINIO_PORT", "9300")),
                    help="MinIO's port, started if not running and stopped after (default "
                         "$QUIVER_BENCH_MINIO_PORT or 9300; console on the next port)")
    args = parser.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.s3_latency < 0 or args.s3_bandwidth < 0:
        parser.error("--s3-latency and --s3-bandwidth must be 0 or more")
    unknown = set(args.engines.split(",")) - set(engines.NAMES)
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    return args


def write_section(section, header):
    images = "".join(f"\n![{section.title}]({chart})\n" for chart in section.charts)
    with open(os.path.join(RESULTS, f"{section.name}.md"), "w") as f:
        f.write(f"# {section.title}\n\n{header}\n{images}\n{section.body}")


def update_readme(summary):
    with open(README) as f:
        text = f.read()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < 0:
        return
    text = text[:begin + len(README_BEGIN)] + "\n" + summary + text[end:]
    with open(README, "w") as f:
        f.write(text)


def main(argv):
    args = parse_args(argv)
    mode = MODES["quick" if args.quick else "full" if args.full else "default"]
    if args.reps:
        mode = dataclasses.replace(mode, reps=args.reps)
    selected = [s for s in SCENARIOS if not args.scenario or s.NAME in args.scenario]
    built = quiver_binary()
    binary = installed(built)
    engine_list = engines.make(args.engines.split(","), binary, args.timeout)
    cache = PageCache(data.ROOT)
    os.makedirs(RESULTS, exist_ok=True)

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Run {when}, mode {mode.name} (TPC-H SF {mode.sf}, {mode.small_files} small "
              f"files, hot = best of {mode.reps}).\n\n"
              f"- machine: {report.machine()}\n"
              + "".join(f"- {e.version()}\n" for e in engine_list)
              + f"- quiver runs as installed: a fresh copy of {built}, out of the page cache\n"
              + f"- {cache.description}\n"
              + f"- {report.load()}\n")
    print(header, flush=True)

    bench = Bench(mode, engine_list, cache, RESULTS, args)
    sections, started = [], time.time()
    try:
        for scenario in selected:
            print(f"bench: scenario {scenario.NAME}: {scenario.TITLE}", flush=True)
            section = scenario.run(bench)
            write_section(section, header)
            sections.append(section)
    finally:
        for e in engine_list:
            e.close()

    lines = [f"### {s.title} ([details](results/{s.name}.md))\n\n"
             + "".join(f"- {line}\n" for line in s.summary) for s in sections]
    summary = header + "\n" + "\n".join(lines)
    if PENDING:
        summary += "\nPending: " + "; ".join(PENDING.values()) + ".\n"
    with open(os.path.join(RESULTS, "summary.md"), "w") as f:
        f.write("# Benchmark summary\n\n" + summary.replace("(results/", "("))
    print("\n" + summary + f"\nbench: done in {time.time() - started:.0f} s; results in {RESULTS}")
    release = "/debug/" not in binary
    if mode.name != "quick" and release and len(selected) == len(SCENARIOS):
        update_readme(summary)
        print(f"bench: latest numbers written into {README}")


if __name__ == "__main__":
    main(sys.argv[1:])
