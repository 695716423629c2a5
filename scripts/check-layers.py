#!/usr/bin/env python3
"""Fails when an import crosses the layers of ../shared/DESIGN.md (data flows down):

- a building block (crypto, math, hashing, he, ot, vole, okvs) never imports
  protocols, session, io or testing;
- protocols never import session, staged or testing; session never imports staged or
  testing (staged runs sit beside the session layer and use it);
- net imports nothing else of the crate; wire only net and error; io only error;
- sibling modules never import each other in a cycle (a family's files form a tree);
- a CLI subcommand module (crates/setwise-cli/src/commands/) imports no other one.

`error` is the shared vocabulary: it names each layer's error type and every layer
returns it, so it takes no part in the cycle check.

It reads `crate::`, `super::` and `self::` paths (also inside `use crate::{...}` groups)
with comments and strings removed, so doc links do not count. Usage: check-layers.py [ROOT]
"""

import re
import sys
from pathlib import Path

BLOCKS = {"crypto", "math", "hashing", "he", "ot", "vole", "okvs"}
FORBIDDEN = {
    **{b: {"protocols", "session", "staged", "io", "testing"} for b in BLOCKS},
    "protocols": {"session", "staged", "testing"},
    "session": {"staged", "testing"},
}
ONLY = {"net": {"net"}, "wire": {"wire", "net", "error"}, "io": {"io", "error"}}


def strip(code: str) -> str:
    """Code without comments, string and char literals (lifetimes survive)."""
    code = re.sub(r'r(#*)"(?:.|\n)*?"\1', '""', code)
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            i += 1
            while i < n and code[i] != '"':
                i += 2 if code[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", code[i:i + 4]):
            i = code.index("'", i + 2) + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def paths(code: str):
    """Every module path the code names, as lists of segments (`crate`, `super` kept)."""
    found = []
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)*)::\{", code):
        base = [m.group(1)] + [s for s in m.group(2).split("::") if s]
        depth, j, start = 1, m.end(), m.end()
        items, cur = [], []
        while j < len(code) and depth:
            ch = code[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if depth == 1 and ch == ",":
                items.append(code[start:j])
                start = j + 1
            j += 1
        items.append(code[start:j - 1])
        for it in items:
            first = re.match(r"\s*(\w+)", it)
            if first and first.group(1) not in ("self",):
                found.append(base + [first.group(1)])
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", code):
        found.append([m.group(1)] + [s for s in m.group(2).split("::") if s])
    return found


def module_of(src: Path, f: Path):
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def resolve(mod, segs, is_dir_mod):
    """Absolute segments (without `crate`) of a path used in module `mod`."""
    if segs[0] == "crate":
        return segs[1:]
    here = list(mod) if is_dir_mod else list(mod)
    # `super` in `a/b.rs` (module a::b) is a; in `a/b/mod.rs` (module a::b) is a too.
    k = 0
    while k < len(segs) and segs[k] == "super":
        here = here[:-1]
        k += 1
    if segs[0] == "self":
        return here + segs[1:]
    return here + segs[k:]


def check_crate(src: Path, problems, layered=True):
    files = sorted(src.rglob("*.rs"))
    mods = {tuple(module_of(src, f)): f for f in files}
    edges = {}
    for f in files:
        mod = tuple(module_of(src, f))
        code = strip(f.read_text())
        top = mod[0] if mod else ""
        for segs in paths(code):
            target = resolve(mod, segs, f.name == "mod.rs")
            # The longest prefix that is a module of this crate.
            while target and tuple(target) not in mods:
                target = target[:-1]
            if not target:
                continue
            t = tuple(target)
            if layered and t[0] != top:
                bad = FORBIDDEN.get(top, set())
                if t[0] in bad or (top in ONLY and t[0] not in ONLY[top]):
                    problems.append(f"{f}: {'::'.join(mod)} imports {'::'.join(t)} ({top} must not import {t[0]})")
            # Sibling edges: the child of the common parent on each side.
            common = 0
            while common < min(len(mod), len(t)) and mod[common] == t[common]:
                common += 1
            if common < len(mod) and common < len(t):
                a, b = mod[: common + 1], t[: common + 1]
                if "error" not in (a[0], b[0]):
                    edges.setdefault(a, set()).add(b)
    # Cycles among siblings (strongly connected components of more than one module).
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        names = ", ".join("::".join(c) for c in sorted(comp))
        problems.append(f"{src}: modules import each other in a cycle: {names}")


def check_cli(src: Path, problems):
    commands = src / "commands"
    if not commands.is_dir():
        return
    for f in sorted(commands.rglob("*.rs")):
        if f.name == "mod.rs":
            continue
        me = f.stem
        for segs in paths(strip(f.read_text())):
            if segs[:2] == ["crate", "commands"] and len(segs) > 2 and segs[2] != me:
                problems.append(f"{f}: the subcommand {me} imports the subcommand {segs[2]}")
            if segs[0] == "super" and len(segs) > 1 and (src / "commands" / f"{segs[1]}.rs").exists():
                problems.append(f"{f}: the subcommand {me} imports the subcommand {segs[1]}")


def self_test():
    """The check must catch what it is for: a fake tree with one violation of each kind."""
    import tempfile

    fake = {
        "crates/setwise/src/lib.rs": "pub mod ot; pub mod protocols; pub mod session; pub mod net;",
        "crates/setwise/src/ot/mod.rs": "mod base;",
        "crates/setwise/src/ot/base.rs": "use crate::{net::Channel, protocols::chunks}; // crate::session in a comment",
        "crates/setwise/src/protocols/mod.rs": "pub mod a; pub mod b; pub mod chunks;",
        "crates/setwise/src/protocols/chunks.rs": "fn f() { super::super::session::run(); }",
        "crates/setwise/src/protocols/a.rs": "use super::b::X; const S: &str = \"crate::session\";",
        "crates/setwise/src/protocols/b.rs": "use crate::protocols::a::Y;",
        "crates/setwise/src/session/mod.rs": "use crate::protocols::a;",
        "crates/setwise/src/net/mod.rs": "use crate::wire::Reader;",
        "crates/setwise/src/wire/mod.rs": "use crate::net::Channel;",
        "crates/setwise-cli/src/main.rs": "mod commands;",
        "crates/setwise-cli/src/commands/mod.rs": "pub mod demo; pub mod bench;",
        "crates/setwise-cli/src/commands/demo.rs": "",
        "crates/setwise-cli/src/commands/bench.rs": "use super::demo::sets;",
    }
    with tempfile.TemporaryDirectory() as d:
        for path, text in fake.items():
            (Path(d) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / path).write_text(text)
        problems = []
        check_crate(Path(d) / "crates/setwise/src", problems)
        check_crate(Path(d) / "crates/setwise-cli/src", problems, layered=False)
        check_cli(Path(d) / "crates/setwise-cli/src", problems)
    want = ["ot::base imports protocols", "protocols::chunks imports session", "net imports wire",
            "cycle: protocols::a, protocols::b", "cycle: protocols, session", "cycle: net, wire",
            "bench imports the subcommand demo"]
    missed = [w for w in want if not any(w in p for p in problems)]
    extra = [p for p in problems if not any(w in p for w in want)]
    if missed or extra:
        print(f"check-layers self-test failed: missed {missed}, unexpected {extra}")
        sys.exit(2)


def main():
    self_test()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    problems = []
    check_crate(root / "crates/setwise/src", problems)
    check_crate(root / "crates/setwise-cli/src", problems, layered=False)
    check_cli(root / "crates/setwise-cli/src", problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} forbidden import(s); see the layer rules in this script")
        sys.exit(1)
    print("check-layers: every import follows the layers")


if __name__ == "__main__":
    main()
