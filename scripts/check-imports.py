#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""No import cycle among the files of rust/driver (make check).

    scripts/check-imports.py [DIR]      check DIR (default rust/driver)
    scripts/check-imports.py --graph [DIR]
                                        also print every edge, file to file
    scripts/check-imports.py --self-test
                                        run the checker on fixtures: each
                                        with a cycle must fail, the others
                                        pass

A node is one top-level module of DIR: `x.rs` (or `x/mod.rs`) together with
its child modules in `x/`, so transport/requester.rs counts as transport.rs;
DIR/mod.rs is the node of DIR's own module (crate::driver). An edge x -> y
is any path in x's code that names a module of y: in `use` items at any
depth (`use super::{a, b::c}` groups expanded, `self` in groups, `as`
renames, globs) and in code (`super::net::send(...)`, `<T as
super::x::Trait>`), written from `crate::driver::`, `super::`,
`super::super::` (from a child module or an inline `mod { }`), `self::`,
or a child module's own name. Comments (doc links included), string and
character literals and `pub(in path)` visibility name no dependency and
are skipped. Paths outside DIR's module (crate::ib, kernel, core) are not
edges.

Prints each cycle as a chain of files and, for each edge in it, the line
that makes it, then exits 1; prints a one-line summary and exits 0 when
there is none. Python 3 standard library only; no Rust parser, so a path
written through a macro's own syntax (`$crate`) or `include!` is not seen.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIR = "rust/driver"


def strip(src):
    """`src` with comments and the insides of string and character literals
    blanked (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(src)

    def blank(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        elif c in "rbc" and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")) and (
            m := re.compile(r'(?:b|c)?r(#*)"').match(src, i)
        ):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(src[i:j]))
            i = j
        elif c == '"' or (c in "bc" and src.startswith('"', i + 1) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_"))):
            j = src.index('"', i) + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(blank(src[i:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if src.startswith("\\", i + 1):
                j = i + 3
                while j < n and src[j] != "'":
                    j += 1
                j += 1
            elif i + 2 < n and src[i + 2] == "'":
                j = i + 3
            else:
                out.append(c)
                i += 1
                continue
            out.append(blank(src[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokens(src):
    """(text, line) of each token of the stripped source."""
    line, pos, out = 1, 0, []
    for m in TOKEN.finditer(src):
        line += src.count("\n", pos, m.start())
        pos = m.start()
        out.append((m.group(), line))
    return out


def is_ident(t):
    return t[0].isalpha() or t[0] == "_"


def parse_use(toks, i):
    """The paths of the use tree starting at toks[i] (after `use`), and the
    index after its `;`. Each path is a list of segments."""
    paths = []

    def tree(i, prefix):
        segs = []
        if toks[i][0] == "::":
            i += 1
        while i < len(toks):
            t = toks[i][0]
            if t == "{":
                i += 1
                while toks[i][0] != "}":
                    i = tree(i, prefix + segs)
                    if toks[i][0] == ",":
                        i += 1
                return i + 1
            if t == "*":
                paths.append(prefix + segs + ["*"])
                return i + 1
            if not is_ident(t):
                break
            segs.append(t)
            i += 1
            if i < len(toks) and toks[i][0] == "::":
                i += 1
                continue
            break
        if i < len(toks) and toks[i][0] == "as":
            i += 2
        if segs:
            paths.append(prefix + segs)
        return i

    i = tree(i, [])
    while i < len(toks) and toks[i][0] != ";":
        i += 1
    return paths, i + 1


class Graph:
    def __init__(self, root, crate_path):
        self.root = root  # DIR on disk
        self.crate_path = crate_path  # its module path, e.g. ["driver"]
        self.nodes = {}  # node name -> display path
        self.files = []  # (path, module path)
        self.edges = {}  # (from, to) -> (file, line, path text)
        for dirpath, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
                if rel[-1] == "mod":
                    rel = rel[:-1]
                self.files.append((path, crate_path + rel))
                node = rel[0] if rel else "mod"
                if len(rel) <= 1:
                    self.nodes[node] = self.show(path)
                else:
                    self.nodes.setdefault(node, self.show(os.path.join(root, rel[0])) + "/")
        for path, modpath in self.files:
            self.scan(path, modpath)

    def show(self, path):
        return os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else path

    def node_of(self, modpath):
        return modpath[len(self.crate_path)] if len(modpath) > len(self.crate_path) else "mod"

    def resolve(self, cur, children, segs):
        """The node a path names from module `cur`, or None outside DIR."""
        if segs[0] == "crate":
            abs_ = segs[1:]
        elif segs[0] in ("super", "self"):
            abs_ = list(cur)
            k = 0
            while k < len(segs) and segs[k] in ("super", "self"):
                if segs[k] == "super":
                    if not abs_:
                        return None
                    abs_.pop()
                k += 1
            abs_ += segs[k:]
        elif segs[0] in children.get(tuple(cur), ()):
            abs_ = list(cur) + segs
        else:
            return None
        abs_ = [s for s in abs_ if s != "self"]
        n = len(self.crate_path)
        if abs_[:n] != self.crate_path:
            return None
        if len(abs_) > n and abs_[n] in self.nodes:
            return abs_[n]
        return "mod"

    def scan(self, path, filemod):
        with open(path, encoding="utf-8") as f:
            toks = tokens(strip(f.read()))
        src_node = self.node_of(filemod)
        # Child modules declared (`mod x;` / `mod x {`), by module path.
        children = {}
        stack = [(tuple(filemod), 0)]  # (module path, brace depth it opened at)
        depth = 0

        def edge(segs, line):
            cur = stack[-1][0]
            dst = self.resolve(list(cur), children, segs)
            if dst is not None and dst != src_node:
                shown = "::".join(segs).removesuffix("::self")
                self.edges.setdefault((src_node, dst), (self.show(path), line, shown))

        # The file's own `mod x;` first: a path may name a child declared
        # further down (inline modules are tracked as they open).
        level = 0
        for k, (t, _) in enumerate(toks):
            level += (t == "{") - (t == "}")
            if level == 0 and t == "mod" and k + 2 < len(toks) and is_ident(toks[k + 1][0]) and toks[k + 2][0] == ";":
                children.setdefault(tuple(filemod), set()).add(toks[k + 1][0])
        i = 0
        while i < len(toks):
            t, line = toks[i]
            prev = toks[i - 1][0] if i else ""
            if t == "mod" and i + 2 < len(toks) and is_ident(toks[i + 1][0]) and toks[i + 2][0] in (";", "{"):
                name = toks[i + 1][0]
                children.setdefault(stack[-1][0], set()).add(name)
                if toks[i + 2][0] == "{":
                    depth += 1
                    stack.append((stack[-1][0] + (name,), depth))
                    i += 3
                    continue
                i += 3
                continue
            if t == "{":
                depth += 1
            elif t == "}":
                if len(stack) > 1 and stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
            elif t == "use" and prev != "::":
                paths, i = parse_use(toks, i + 1)
                for segs in paths:
                    edge([s for s in segs if s != "*"] or ["self"], line)
                continue
            elif is_ident(t) and prev != "::" and i + 1 < len(toks) and toks[i + 1][0] == "::":
                # `pub(in path)` names a scope, not a dependency.
                if prev == "in" and i >= 2 and toks[i - 2][0] == "(":
                    while i < len(toks) and toks[i][0] != ")":
                        i += 1
                    continue
                segs = [t]
                j = i + 1
                while j + 1 < len(toks) and toks[j][0] == "::" and is_ident(toks[j + 1][0]):
                    segs.append(toks[j + 1][0])
                    j += 2
                if t in ("crate", "super", "self") or t in children.get(stack[-1][0], ()):
                    edge(segs, line)
                i = j
                continue
            i += 1

    def cycles(self):
        """The strongly connected components with more than one node
        (Tarjan), each as a sorted list."""
        adj = {}
        for a, b in self.edges:
            adj.setdefault(a, []).append(b)
        index, low, on, st, out = {}, {}, set(), [], []

        def visit(v):
            index[v] = low[v] = len(index)
            st.append(v)
            on.add(v)
            for w in sorted(adj.get(v, ())):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = st.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        sys.setrecursionlimit(10000)
        for v in sorted(self.nodes):
            if v not in index:
                visit(v)
        return sorted(out)

    def shortest_path(self, src, dst, within):
        prev, todo = {src: None}, [src]
        while todo:
            nxt = []
            for v in todo:
                for a, b in sorted(self.edges):
                    if a == v and b in within and b not in prev:
                        prev[b] = v
                        nxt.append(b)
            todo = nxt
        if dst not in prev:
            return None
        p = [dst]
        while p[-1] != src:
            p.append(prev[p[-1]])
        return p[::-1]


def check(root, crate_path, graph=False, out=sys.stdout):
    g = Graph(root, crate_path)
    if graph:
        for (a, b), (f, line, p) in sorted(g.edges.items()):
            print(f"{g.nodes[a]} -> {g.nodes[b]}  ({f}:{line}: {p})", file=out)
    comps = g.cycles()
    if not comps:
        print(
            f"check-imports: {g.show(root)}: {len(g.files)} files, {len(g.nodes)} modules, "
            f"{len(g.edges)} file-to-file edges, no import cycle",
            file=out,
        )
        return 0
    for comp in comps:
        within = set(comp)
        names = ", ".join(os.path.basename(g.nodes[v].rstrip("/")) for v in comp)
        print(f"import cycle among {len(comp)} files of {g.show(root)}: {names}", file=out)
        # A shortest cycle through each edge of the component, once each:
        # together they show every edge that would have to go.
        seen, shown = set(), set()
        for a, b in sorted(e for e in g.edges if e[0] in within and e[1] in within):
            back = g.shortest_path(b, a, within)
            cyc = [a] + back
            k = cyc.index(min(cyc[:-1]))
            key = tuple(cyc[k:-1] + cyc[:k])
            if key in seen:
                continue
            seen.add(key)
            print("  " + " -> ".join(g.nodes[v] for v in key + (key[0],)), file=out)
            shown.update(zip(key, key[1:] + (key[0],)))
        print("  where:", file=out)
        for a, b in sorted(shown):
            f, line, p = g.edges[(a, b)]
            print(f"    {g.nodes[a]} -> {g.nodes[b]}: {f}:{line}: {p}", file=out)
    return 1


# Fixtures for --self-test: name -> (files, cycle expected). Each cyclic one
# closes a -> b -> c -> a with a different way of writing the last edge, so
# that every way the checker reads must be seen for it to fail.
BASE = {
    "mod.rs": "pub(crate) mod a;\npub(crate) mod b;\npub(crate) mod c;\npub(crate) mod leaf;\n",
    "a.rs": "use super::{leaf, b::{self, B}};\npub(crate) struct A;\n",
    "b.rs": "use crate::driver::c::C;\npub(crate) struct B;\n",
    "c.rs": "mod child;\npub(crate) struct C;\n",
    "leaf.rs": "pub(crate) fn f() {}\n",
}
CLOSING = {
    "group": "use super::super::{leaf::f, a::A};\n",
    "crate-path": "use crate::driver::a::A;\n",
    "super-super": "use super::super::a;\n",
    "inline-path": "fn g() -> usize { core::mem::size_of::<super::super::a::A>() }\n",
    "glob": "use super::super::a::*;\n",
    "rename": "use super::super::a as other;\n",
    "inline-mod": "mod inner {\n    use super::super::super::a::A;\n}\n",
    "expression": "fn g() { let _ = crate::driver::a::A; }\n",
}
NOT_EDGES = (
    "// use super::super::a::A;\n"
    "/// [`A`](super::super::a::A) /* nested /* super::super::a */ */\n"
    'const S: &str = "super::super::a::A";\n'
    'const R: &str = r#"use super::super::a;"#;\n'
    "const C: char = '\"';\n"
    "const Q: [char; 2] = ['\\'', '\\\\'];\n"
    "fn h<'a>(x: &'a u8) -> &'a u8 { x }\n"
    "pub(in crate::driver) fn k() {}\n"
    "use crate::ib::a::A;\n"
    "use kernel::super_thing;\n"
)


def self_test():
    cases = [(f"cycle through {k}", {"c/child.rs": v}, True) for k, v in CLOSING.items()]
    cases.append(("no cycle: paths in comments, strings, pub(in), other crates", {"c/child.rs": NOT_EDGES}, False))
    cases.append(("no cycle: a leaf's own paths", {"c/child.rs": "use super::C;\nuse super::super::leaf;\n"}, False))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, extra, cyclic) in enumerate(cases):
            root = os.path.join(tmp, str(k), "driver")
            for rel, text in {**BASE, **extra}.items():
                p = os.path.join(root, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as f:
                    f.write(text)
            # As make check runs it: a separate process, its exit status.
            run = subprocess.run(
                [sys.executable, os.path.abspath(__file__), root], capture_output=True, text=True
            )
            # The chain printed, and the line that closes it in the child.
            chain = re.search(r"/a\.rs -> \S*/b\.rs -> \S*/c\.rs -> \S*/a\.rs$", run.stdout, re.M)
            where = re.search(r"/c\.rs -> \S*/a\.rs: \S*/c/child\.rs:\d+: ", run.stdout)
            ok = (run.returncode == 1 and chain and where) if cyclic else (run.returncode == 0)
            if not ok:
                failed += 1
                print(f"check-imports self-test FAILED: {name}: exit {run.returncode}", file=sys.stderr)
                sys.stderr.write(run.stdout + run.stderr)
    if failed:
        return 1
    print(f"check-imports: self-test: {len(cases)} fixtures as expected ({len(CLOSING)} with a cycle)")
    return 0


def main(argv):
    # Piped into head: stop quietly, as other tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    graph = "--graph" in argv
    args = [a for a in argv if a != "--graph"]
    if args == ["--self-test"]:
        return self_test()
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(args[0] if args else os.path.join(REPO, DEFAULT_DIR))
    return check(root, [os.path.basename(root)], graph)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
