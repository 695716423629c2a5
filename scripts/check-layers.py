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
- a module imports only layers below its own, or other modules of its own layer in the
  primitives, blocks and interactive layers (net and io are independent of each other);
- primitives, blocks and interactive blocks never import `io` (no files), primitives and
  blocks never import `net` (no I/O), and interactive blocks take only the
  `net::Channel` trait from it (no sockets, no servers);
- nothing inside the crate names the root's re-exports (`crate::Result`): the root is
  the top, so a block that names it depends on everything;
- sibling modules never import each other in a cycle (a family's files form a tree),
  `error` included;
- a CLI subcommand module (crates/setwise-cli/src/commands/) imports no other one.

It reads `crate::`, `super::` and `self::` paths (inside `use` groups too, nested ones,
`self` and `*` included; `super` resolved through inline modules such as `mod tests`)
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
# No building block reads files or items: inputs reach them as bytes from the protocols.
NO_IO = NO_NET | {"ot", "vole"}
# What an interactive block may take from `net`: the message interface, nothing else.
NET_FOR_INTERACTIVE = {"Channel"}
INTERACTIVE = {"ot", "vole"}


def layer_problem(top, t0, item):
    """Why module `top` may not import `t0` (`item`: the name after it), or None."""
    if top not in RANK or t0 not in RANK or top == t0:
        return None
    if t0 == "net" and top in NO_NET:
        return f"{top} must not import net: a block does no I/O"
    if t0 == "io" and top in NO_IO:
        return f"{top} must not import io: a block reads no files"
    if t0 == "net" and top in INTERACTIVE and item not in NET_FOR_INTERACTIVE:
        return f"{top} may take only net::Channel from net, not net::{item}"
    if RANK[t0] > RANK[top]:
        return f"{LAYER_NAME[top]} must not import {LAYER_NAME[t0]}, a layer above it"
    if RANK[t0] == RANK[top] and LAYER_NAME[top] not in OPEN_LAYERS:
        return f"{top} and {t0} are independent modules of one layer"
    return None



def strip(code: str) -> str:
    """Code without comments, string and char literals (lifetimes survive)."""
    # Raw strings (r"…", r#"…"#, br"…"); the r must start a token, not end a word or string.
    code = re.sub(r'(?<![\w"])b?r(#*)"(?:.|\n)*?"\1', '""', code)
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


def split_top(text: str):
    """`text` split at the commas outside braces."""
    items, depth, start = [], 0, 0
    for j, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:j])
            start = j + 1
    items.append(text[start:])
    return items


def group_paths(base, text: str):
    """The paths of a `use` group's items under `base`, nested groups included; `self`
    is the base module itself and `*` every item of it."""
    out = []
    for it in split_top(text):
        it = it.strip()
        nested = re.match(r"((?:\w+\s*::\s*)*)\{(.*)\}\s*$", it, re.S)
        if nested:
            prefix = [seg.strip() for seg in nested.group(1).split("::") if seg.strip()]
            out += group_paths(base + prefix, nested.group(2))
            continue
        m = re.match(r"(\w+(?:\s*::\s*\w+)*)(\s*::\s*\*)?", it)
        if m:
            segs = [seg.strip() for seg in m.group(1).split("::")]
            if segs == ["self"]:
                out.append(list(base))
            else:
                out.append(base + segs + (["*"] if m.group(2) else []))
        elif it == "*":
            out.append(base + ["*"])
    return out


def paths(code: str):
    """Every module path the code names, as (position, segments) with `crate`, `super`
    and `self` kept."""
    found = []
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)*)::\{", code):
        base = [m.group(1)] + [s for s in m.group(2).split("::") if s]
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        found += [(m.start(), segs) for segs in group_paths(base, code[m.end():j - 1])]
    # A path that goes on into a `::{...}` group was read above, item by item; one that
    # ends in `::*` imports every item of its module.
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)(::\*)?(?![\w:])", code):
        segs = [m.group(1)] + [s for s in m.group(2).split("::") if s]
        found.append((m.start(), segs + (["*"] if m.group(3) else [])))
    return found


def inline_modules(code: str):
    """The inline modules (`mod tests { … }`) of a file: (start, end, name) spans."""
    spans = []
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        spans.append((m.start(), j, m.group(1)))
    return spans


def module_of(src: Path, f: Path):
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def resolve(mod, segs, is_dir_mod):
    """Absolute segments (without `crate`) of a path used in module `mod` (the file's
    module and the inline modules around the path)."""
    if segs[0] == "crate":
        return segs[1:]
    here = list(mod)
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
        inline = inline_modules(code)
        for pos, segs in paths(code):
            around = tuple(name for start, end, name in inline if start < pos < end)
            target = resolve(mod + around, segs, f.name == "mod.rs")
            if target and target[0] in ("self", "super"):
                continue  # above the root: not a path this check can read
            if layered and mod and target and (target[0],) not in mods:
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
        for _, segs in paths(strip(f.read_text())):
            if segs[:2] == ["crate", "commands"] and len(segs) > 2 and segs[2] != me:
                problems.append(f"{f}: the subcommand {me} imports the subcommand {segs[2]}")
            if segs[0] == "super" and len(segs) > 1 and (src / "commands" / f"{segs[1]}.rs").exists():
                problems.append(f"{f}: the subcommand {me} imports the subcommand {segs[1]}")


def self_test():
    """The check must catch what it is for: a fake tree with one violation of each kind."""
    import tempfile

    fake = {
        "crates/setwise/src/lib.rs": "pub mod error; pub mod hashing; pub mod he; pub mod io; pub mod okvs; pub mod ot; "
        "pub mod protocols; "
        "pub mod session; pub mod net; pub mod vole; pub use error::Result;",
        "crates/setwise/src/error/mod.rs": "use crate::he::HeError;",
        "crates/setwise/src/he/mod.rs": "use crate::error::Result; use crate::net::TcpChannel;",
        "crates/setwise/src/okvs/mod.rs": "mod band; pub fn f() -> crate::Result<()> { Ok(()) }",
        "crates/setwise/src/vole/mod.rs": "use crate::net::{Channel, serve}; mod pprf;",
        "crates/setwise/src/vole/pprf.rs": "use crate::net::{self, Channel}; use crate::{net::{Channel}};",
        "crates/setwise/src/ot/iknp.rs": "use crate::net::*; use crate::{net::{Channel, TcpChannel}};",
        "crates/setwise/src/okvs/band.rs": "const P: &str = \"peer\"; use crate::session::run;",
        "crates/setwise/src/io/mod.rs": "",
        "crates/setwise/src/hashing/mod.rs": "use crate::io::ItemSet; fn g() -> super::Result<()> { Ok(()) }",
        "crates/setwise/src/ot/mod.rs": "mod base; mod iknp;",
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
            "error must not import blocks", "cycle: error, he",
            "vole::pprf imports net (vole may take only net::Channel from net, not net::)",
            "ot::iknp imports net::* (ot may take only net::Channel from net, not net::*)",
            "ot::iknp imports net::TcpChannel", "okvs::band imports session::run",
            "hashing must not import io", "hashing names the crate root's re-export crate::Result"]
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
