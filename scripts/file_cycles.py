#!/usr/bin/env python3
"""Files that call each other in a circle (docs/architecture.md, "Files depend one way").

Reads the object files of a build (nm): a file depends on another when it uses a symbol the other
defines. Prints each strongly connected group of more than one file and exits 1, or prints
"no file cycles" and exits 0.
usage: scripts/file_cycles.py [BUILD_DIR]   (default build)
"""
import collections
import glob
import os
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
objs = [o for o in glob.glob(os.path.join(build, "**", "*.o"), recursive=True)
        if "/tests/" not in o and "CompilerId" not in o and "/generated/" not in o]
if not objs:
    sys.exit(f"file_cycles: no object files under {build}")
defs, uses = {}, {}
for o in objs:
    out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
    name = os.path.relpath(o, build)
    d, u = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDRB":
            d.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            u.add(parts[1])
    defs[name], uses[name] = d, u
owner = {}
for n, d in defs.items():
    for s in d:
        owner.setdefault(s, n)
graph = collections.defaultdict(set)
for n, u in uses.items():
    for s in u:
        if s in owner and owner[s] != n:
            graph[n].add(owner[s])
# Tarjan's strongly connected components
index, low, stack, on, groups, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(100000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in graph[v]:
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
            groups.append(sorted(comp))


for v in list(defs):
    if v not in index:
        visit(v)
for g in groups:
    print("cycle: " + " <-> ".join(g))
print(f"{len(objs)} object files, " + ("no file cycles" if not groups else f"{len(groups)} cycles"))
sys.exit(1 if groups else 0)
