"""The JSON files the analysis scripts read: plain, or xz-compressed as the traces and records are
committed (FILE.xz; a FILE that does not exist is read from FILE.xz where that does)."""
import json
import lzma
import os


def load_json(path):
    if not path.endswith(".xz") and not os.path.exists(path) and os.path.exists(path + ".xz"):
        path += ".xz"
    with (lzma.open if path.endswith(".xz") else open)(path, "rt") as f:
        return json.load(f)


def load_records(path):
    """An epref bench calib records file (compute.json, kernels.json): (its meta, its records)."""
    d = load_json(path)
    return d[0].get("meta", d[0]), d[1:]
