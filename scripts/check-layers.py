#!/usr/bin/env python3
"""Fails when an import crosses the layers of the library (docs/architecture.md, after
../shared/DESIGN.md; data flows down, never up). Layers, bottom first:

    error        the error vocabulary: every layer's error type; imports nothing
    net, io      transports (Channel, TCP, TLS, servers); items from files
    wire         codec, messages, chunked streams over a Channel
    primitives   math (fields, polynomials), crypto (rng, dst, groups, OPRF, PRG)
    blocks       hashing, he, okvs
    interactive  ot, vole: two-party blocks; they talk through `net::Channel` only
    protocols    the registry and the families
    session      hello, auto, dispatch
    the tag list message_tags: every tag of every layer, checked for uniqueness
    staged       bucketed store-and-forward runs
    testing      helpers for tests
    the root     lib.rs re-exports `session::run`, so it counts as the top

Rules:
- a module imports only layers below its own, or modules of its own layer where the
  layer allows it (primitives, blocks, interactive, net/io do not: net and io are
  independent);
- primitives and blocks never import `net` (no I/O); interactive blocks import only the
  `net::Channel` trait from it (no sockets, no servers);
- nothing inside the crate names the root's re-exports (`crate::Result`): the root is
  the top, so a block that names it depends on everything;
- sibling modules never import each other in a cycle (a family's files form a tree),
  `error` included;
- a CLI subcommand module (crates/setwise-cli/src/commands/) imports no other one.

It reads `crate::`, `super::` and `self::` paths (also inside `use crate::{...}` groups)
with comments and strings removed, so doc links do not count. A self-test plants one
violation of each kind in a fake tree and fails unless each is caught.
Usage: check-layers.py [ROOT]
"""

import re
import sys
from pathlib import Path

LAYERS = [
    ("error", {"error"}),
    ("net, io", {"net", "io"}),
    ("wire", {"wire"}),
    ("primitives", {"math", "crypto"}),
    ("blocks", {"hashing", "he", "okvs"}),
    ("interactive", {"ot", "vole"}),
    ("protocols", {"protocols"}),
    ("session", {"session"}),
    ("the tag list", {"message_tags"}),
    ("staged", {"staged"}),
    ("testing", {"testing"}),
]
RANK = {m: i for i, (_, ms) in enumerate(LAYERS) for m in ms}
LAYER_NAME = {m: name for name, ms in LAYERS for m in ms}
# Layers whose modules may import each other (the cycle check still applies).
OPEN_LAYERS = {"primitives", "blocks", "interactive"}
NO_NET = {"math", "crypto", "hashing", "he", "okvs"}
# What an interactive block may take from `net`: the message interface, nothing else.
NET_FOR_INTERACTIVE = {"Channel"}
INTERACTIVE = {"ot", "vole"}


def layer_problem(top, t0, item):
    """Why module `top` may not import `t0` (`item`: the name after it), or None."""
    if top not in RANK or t0 not in RANK or top == t0:
        return None
    if t0 == "net" and top in NO_NET:
        return f"{top} must not import net: a block does no I/O"
    if t0 == "net" and top in INTERACTIVE and item not in NET_FOR_INTERACTIVE:
        return f"{top} may take only net::Channel from net, not net::{item}"
    if RANK[t0] > RANK[top]:
        return f"{LAYER_NAME[top]} must not import {LAYER_NAME[t0]}, a layer above it"
    if RANK[t0] == RANK[top] and LAYER_NAME[top] not in OPEN_LAYERS:
        return f"{top} and {t0} are independent modules of one layer"
    return None



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
            first = re.match(r"\s*(\w+(?:\s*::\s*\w+)*)", it)
            if first and first.group(1) != "self":
                found.append(base + [seg.strip() for seg in first.group(1).split("::")])
    # A path that goes on into a `::{...}` group was read above, item by item.
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)\b(?!::)", code):
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
            if layered and mod and segs[0] == "crate" and target and (target[0],) not in mods:
                problems.append(f"{f}: {'::'.join(mod)} names the crate root's re-export crate::{target[0]} "
                                "(the root is the top layer: import it from its module)")
                continue
            full = target
            # The longest prefix that is a module of this crate.
            while target and tuple(target) not in mods:
                target = target[:-1]
            if not target:
                continue
            t = tuple(target)
            if layered and t[0] != top:
                item = full[len(t)] if len(full) > len(t) else ""
                why = layer_problem(top, t[0], item)
                if why:
                    problems.append(f"{f}: {'::'.join(mod)} imports {'::'.join(full)} ({why})")
            # Sibling edges: the child of the common parent on each side.
            common = 0
            while common < min(len(mod), len(t)) and mod[common] == t[common]:
                common += 1
            if common < len(mod) and common < len(t):
                edges.setdefault(mod[: common + 1], set()).add(t[: common + 1])
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
        "crates/setwise/src/lib.rs": "pub mod error; pub mod he; pub mod okvs; pub mod ot; pub mod protocols; "
        "pub mod session; pub mod net; pub mod vole; pub use error::Result;",
        "crates/setwise/src/error/mod.rs": "use crate::he::HeError;",
        "crates/setwise/src/he/mod.rs": "use crate::error::Result; use crate::net::TcpChannel;",
        "crates/setwise/src/okvs/mod.rs": "pub fn f() -> crate::Result<()> { Ok(()) }",
        "crates/setwise/src/vole/mod.rs": "use crate::net::{Channel, serve};",
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
            "bench imports the subcommand demo", "names the crate root's re-export crate::Result",
            "he must not import net", "may take only net::Channel from net, not net::serve",
            "error must not import blocks", "cycle: error, he"]
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
