#!/usr/bin/env python3
"""Import layers of a crate (the gateway's by default): prints the module graph's circles and upward imports.

Reads every `crate::` and `super::` path (in `use` trees and inline) of
crates/steadfast-gateway/src, outside comments and `#[cfg(test)]` code, resolves each to the
source file that defines it, and checks two things:

* no circle between top-level modules (folders or files directly under src/), and
* no import from a module to one in a higher layer (LAYERS below, lowest first);

with --files, a third:

* no circle between files (each .rs file a module, `mod.rs` its folder's).

Bare relative paths (a parent naming its child `http::open`) are not read: they point down.
`--crate jobs` reads crates/steadfast-jobs/src instead; that crate has no LAYERS, so only the
circle checks apply.

Exits 1 when a check fails. Usage: python3 scripts/layers.py [--files] [--crate gateway|jobs]
"""
import pathlib
import re
import sys

CRATES = pathlib.Path(__file__).resolve().parent.parent / "crates"
SRC = CRATES / "steadfast-gateway/src"

# Lowest first; a module may import from its own layer's other members only if no circle forms.
LAYERS = [
    ["wire"],
    ["config", "limits"],
    ["upstream"],
    ["naming", "shared", "tools", "router", "gather", "route"],
    ["call"],
    ["session"],
    ["tasks"],
    ["stdio_front", "http_front", "front"],
    [""],  # lib.rs
]
# Per crate: its source folder and its layers (none: circles only).
CRATE_LAYERS = {"gateway": LAYERS, "jobs": []}
REEXPORTS = {}
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def module_of(path):
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def files():
    out = {}
    for p in sorted(SRC.rglob("*.rs")):
        out[module_of(p)] = p
    return out


def test_only(mods):
    """Modules declared under #[cfg(test)] in their parent."""
    skip = set()
    for mod, p in mods.items():
        text = p.read_text()
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?mod\s+(\w+)\s*;", text):
            if m.group(1):
                target = (p.parent / m.group(1)).resolve()
                skip.add(module_of(target))
            else:
                skip.add(mod + (m.group(2),))
    return skip


def strip(text):
    # Drop #[cfg(test)] items with a braced body (inline test modules run to the file's end).
    text = re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)[0]
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"' or text.startswith('r"', i) or text.startswith('r#"', i):
            if c == "r":
                hashes = text[i + 1 : text.index('"', i)]
                end = '"' + hashes
                j = text.find(end, text.index('"', i) + 1)
                i = n if j < 0 else j + len(end)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(?:[^'\\\n]|\\[^\n]{1,9}?)'", text[i:]):
            m = re.match(r"'(?:[^'\\\n]|\\[^\n]{1,9}?)'", text[i:])
            i += m.end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    return text


def expand(tree):
    """Expands a use tree `a::{b, c::{d}}` into paths."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [prefix + q for p in parts if p for q in expand(p)]


def paths(text):
    found = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", text):
        found += expand(m.group(1))
    text = re.sub(r"\buse\s+[^;]*;", "", text)
    found += re.findall(r"\b(?:crate|super)(?:::\w+)+", text)
    return found


def reexports(mods):
    """Names lib.rs re-exports (`pub use a::b::{X, Y}`), mapped to the path they stand for."""
    out = {}
    for m in re.finditer(r"pub\s+use\s+([^;]*);", strip(mods[()].read_text())):
        for p in expand(m.group(1)):
            out[p.split("::")[-1]] = p
    return out


def resolve(path, here, mods):
    segs = [s for s in path.split("::") if s]
    if segs[0] == "crate":
        base, segs = (), segs[1:]
        if segs and segs[0] in REEXPORTS:
            segs = REEXPORTS[segs[0]].split("::") + segs[1:]
    else:
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs.pop(0) == "super":
                base = base[:-1]
    best = base
    for i in range(1, len(segs) + 1):
        if base + tuple(segs[:i]) in mods:
            best = base + tuple(segs[:i])
        else:
            break
    return best


def sccs(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "lib"


def main():
    global SRC, RANK
    crate = "gateway"
    if "--crate" in sys.argv:
        i = sys.argv.index("--crate")
        crate = sys.argv[i + 1] if i + 1 < len(sys.argv) else ""
        if crate not in CRATE_LAYERS:
            print(f"unknown crate {crate!r}: one of {', '.join(CRATE_LAYERS)}")
            return 2
        SRC = CRATES / f"steadfast-{crate}/src"
    layers = CRATE_LAYERS[crate]
    RANK = {m: i for i, layer in enumerate(layers) for m in layer}
    mods = files()
    REEXPORTS.update(reexports(mods))
    skip = test_only(mods)
    file_edges, top_edges, upward = {}, {}, []
    for mod, p in mods.items():
        if mod in skip or any(mod[: i] in skip for i in range(1, len(mod))):
            continue
        for path in paths(strip(p.read_text())):
            target = resolve(path, mod, mods)
            if target == mod or target == () or target in skip:
                continue
            file_edges.setdefault(mod, set()).add(target)
            a, b = (mod[:1] or ("",))[0], target[0]
            if a != b:
                top_edges.setdefault(a, set()).add(b)
                ra, rb = RANK.get(a), RANK.get(b)
                if layers and (ra is None or rb is None or rb > ra):
                    upward.append((name(mod), path, name(target)))
    top = sccs({m for e in top_edges.items() for m in (e[0], *e[1])}, top_edges)
    ok = True
    print("top-level modules:")
    for a in sorted(top_edges):
        print(f"  {a or 'lib'} -> {', '.join(sorted(top_edges[a]))}")
    if top:
        ok = False
        for c in top:
            print("CIRCLE between top-level modules:", " <-> ".join(x or "lib" for x in c))
    for a, path, b in sorted(set(upward)):
        ok = False
        print(f"UPWARD: {a} uses {path} ({b})")
    if "--files" in sys.argv:
        for c in sccs(set(file_edges), file_edges):
            ok = False
            print("file circle:", " <-> ".join(name(x) for x in c))
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
