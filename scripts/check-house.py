#!/usr/bin/env python3
"""The house's rules, checked in CI (scripts/test.sh):

1. quiver-core's rooms import only rooms on lower floors, as the `floors:` list in its
   lib.rs header orders them (a room may import itself and its own files).
2. No import circle between the files of a crate (a folder's mod.rs with its own files
   aside), in every crate and in lambda/.
3. No file longer than 500 lines before its tests, and no function longer than 80.
4. The crates that run in the browser (quiver-core, quiver-wasm) take their clock from
   web_time: std::time::Instant compiles for wasm32 only as a different type and panics
   when called there, which otherwise shows only in the 12-minute wasm build.

Usage: scripts/check-house.py [REPO]. Prints what breaks a rule; exits 1 if anything does.
"""
import os
import re
import sys

MAX_FILE, MAX_FN = 500, 80
repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
problems = []


def code_of(path):
    """The file's text before its test module, without comments or string contents."""
    text = open(path, encoding="utf-8").read()
    test = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*mod \w+", text, re.M)
    text = text[: test.start()] if test else text
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def modules(src):
    """Module path (tuple) -> file, for one crate's src folder."""
    found = {}
    for root, _, files in os.walk(src):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                found[tuple(parts)] = path
    return found


def imports(module, path, found):
    """The modules (tuples) a file names through `crate::`, `super::` or its own children."""
    code = code_of(path)
    is_folder = os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs")
    named = set()

    def resolve(parts):
        for n in range(len(parts), 0, -1):
            if tuple(parts[:n]) in found:
                return tuple(parts[:n])
        return None

    def paths(prefix, rest):
        # `super` is the parent of the module itself: of a file's module, or a folder's.
        base = [] if prefix == "crate" else list(module[:-1])
        parts = [p for p in rest.split("::") if p]
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
        return base + parts

    for m in re.finditer(r"\b(crate|super)((?:::\w+)*)::\{([^;]*?)\};", code, re.S):
        for item in re.sub(r"\{[^{}]*\}", "", m.group(3)).split(","):
            item = item.strip().split(" as ")[0]
            if item and item != "self":
                named.add(resolve(paths(m.group(1), m.group(2) + "::" + item)))
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", code):
        named.add(resolve(paths(m.group(1), m.group(2))))
    if is_folder:
        for m in re.finditer(r"(?<![:\w])(?:self::)?(\w+)::\w+", code):
            child = module + (m.group(1),)
            if child in found:
                named.add(child)
    named.discard(None)
    named.discard(module)
    return named


def check_circles(crate, src):
    found = modules(src)
    edges = {m: imports(m, p, found) for m, p in found.items()}
    if () in edges:
        edges[()] = set()  # lib.rs's re-exports are not imports
    index, low, stack, on, counter = {}, {}, [], set(), [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            # Allowed: a folder's mod.rs with files of that folder (it re-exports them).
            is_mod = lambda g: os.path.basename(found[g]) in ("mod.rs", "lib.rs", "main.rs")
            folders = {g if is_mod(g) else g[:-1] for g in group}
            own_folder = len(folders) == 1 and any(is_mod(g) for g in group)
            if len(group) > 1 and not own_folder:
                names = ", ".join(sorted("/".join(g) or "lib" for g in group))
                problems.append(f"{crate}: import circle: {names}")

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return found, edges


def check_floors(src, found, edges):
    header = open(os.path.join(src, "lib.rs"), encoding="utf-8").read()
    listed = re.search(r"^//! floors:(.*?)(?:^//!\s*$|^(?!//!))", header, re.M | re.S)
    if not listed:
        problems.append("quiver-core: lib.rs has no `floors:` list")
        return
    floors = re.sub(r"//!", " ", listed.group(1)).split()
    floor = {name: i for i, name in enumerate(floors)}
    rooms = {m[0] for m in found if m}
    for room in sorted(rooms - set(floor)):
        problems.append(f"quiver-core: room '{room}' is on no floor of lib.rs's list")
    for module, named in edges.items():
        if not module or module[0] not in floor:
            continue
        for target in named:
            if target and target[0] in floor and floor[target[0]] > floor[module[0]]:
                problems.append(
                    f"quiver-core: {'/'.join(module)} imports {'/'.join(target)}, a higher floor"
                )


FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def check_sizes(folder):
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in ("tests", "target", "benches")]
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            lines = open(path, encoding="utf-8").read().split("\n")
            end = len(lines)
            for i in range(len(lines) - 1):
                if re.match(r"\s*#\[cfg\(test\)\]", lines[i]) and re.match(r"\s*mod\s+\w+", lines[i + 1]):
                    end = i
                    break
            shown = os.path.relpath(path, repo)
            if end > MAX_FILE:
                problems.append(f"{shown}: {end} lines before its tests (at most {MAX_FILE})")
            for i in range(end):
                m = FN.match(lines[i])
                if not m or lines[i].rstrip().endswith(";"):
                    continue
                for j in range(i + 1, end):
                    if lines[j].startswith(m.group(1) + "}") and not lines[j].startswith(m.group(1) + "} else"):
                        if j - i + 1 > MAX_FN:
                            problems.append(f"{shown}:{i + 1}: fn {m.group(2)} is {j - i + 1} lines (at most {MAX_FN})")
                        break


def check_browser_clock(src):
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            for number, line in enumerate(open(path, encoding="utf-8"), 1):
                if re.search(r"std::time::(\{[^}]*\b)?Instant\b", line):
                    shown = os.path.relpath(path, repo)
                    problems.append(f"{shown}:{number}: std::time::Instant in a crate the browser runs (use web_time::Instant)")


crates = [os.path.join(repo, "crates", c, "src") for c in sorted(os.listdir(os.path.join(repo, "crates")))]
for src in crates + [os.path.join(repo, "lambda", "src")]:
    if not os.path.isdir(src):
        continue
    name = os.path.relpath(src, repo)
    found, edges = check_circles(name, src)
    if src.endswith(os.path.join("quiver-core", "src")):
        check_floors(src, found, edges)
for crate in ("quiver-core", "quiver-wasm"):
    check_browser_clock(os.path.join(repo, "crates", crate, "src"))
for folder in ("crates", "lambda"):
    check_sizes(os.path.join(repo, folder))

for problem in problems:
    print(problem)
print(f"house: {len(problems)} problem(s)" if problems else "house: one direction, no circles, no long rooms")
sys.exit(1 if problems else 0)
