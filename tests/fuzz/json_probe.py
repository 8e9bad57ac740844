#!/usr/bin/env python3
"""Structure-aware complement to the libFuzzer runs (docs/FUZZING.md).

Byte mutation rarely turns a JSON value into another JSON type while keeping
the rest of a config valid, so type confusions (a string where a number is
read, an array where an object is) stay hidden. This writes, for every JSON
seed of a target and every value in it (at any depth), one input per
replacement value (each JSON type, huge/negative/fractional numbers), then
runs the target's fuzz binary once over all of them: any input that is not a
typed mtp::Error or success is a crash.

    python3 tests/fuzz/json_probe.py build-fuzz/bin   # every JSON target
"""
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPLACEMENTS = [None, True, 0, -1, 1.5, 2 ** 31, -2 ** 31 - 1, 2 ** 63, 1e300, "", "x", "1",
                [], [1], {}, {"a": 1}]


def paths(v, prefix=()):
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:4]):  # the first few elements are enough
            yield from paths(x, prefix + (i,))


def replaced(v, path, new):
    v = copy.deepcopy(v)
    if not path:
        return new
    cur = v
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = new
    return v


def variants(doc):
    for p in paths(doc):
        for r in REPLACEMENTS:
            yield replaced(doc, p, r)


def safetensors_with_meta(raw, key, new_meta_json):
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["__metadata__"][key] = json.dumps(new_meta_json)
    h = json.dumps(header, separators=(",", ":"))
    h += " " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h.encode() + raw[8 + n:]


def inputs(target):
    d = os.path.join(HERE, "corpus", target)
    for name in sorted(os.listdir(d)):
        raw = open(os.path.join(d, name), "rb").read()
        if target == "drafter_metadata":
            n = struct.unpack("<Q", raw[:8])[0]
            meta = json.loads(raw[8:8 + n])["__metadata__"]
            for key in ("config", "target"):
                for v in variants(json.loads(meta[key])):
                    yield safetensors_with_meta(raw, key, v)
            continue
        if name.endswith(".safetensors") or target == "safetensors":
            # The JSON header, data section unchanged.
            n = struct.unpack("<Q", raw[:8])[0]
            for v in variants(json.loads(raw[8:8 + n])):
                h = json.dumps(v).encode()
                yield struct.pack("<Q", len(h)) + h + raw[8 + n:]
            if target != "drafter_metadata":
                continue
        if target == "prompts":
            for line in raw.decode().splitlines():
                if line.strip():
                    for v in variants(json.loads(line)):
                        yield (json.dumps(v) + "\n").encode()
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            continue  # a binary seed (shard.safetensors)
        for v in variants(doc):
            yield json.dumps(v).encode()


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else "build-fuzz/bin"
    targets = sys.argv[2:] or ["safetensors", "hf_config", "tokenizer_json", "shards_manifest",
                               "prompts", "drafter_metadata"]
    status = 0
    for t in targets:
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for i, data in enumerate(inputs(t)):
                f = os.path.join(tmp, "%06d" % i)
                open(f, "wb").write(data)
                files.append(f)
            # One process per batch; libFuzzer stops at the first crash.
            bad = []
            for b in range(0, len(files), 500):
                r = subprocess.run([os.path.join(bindir, "fuzz_" + t)] + files[b:b + 500],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    bad.append(r.stderr[-3000:])
            print("%-18s %6d inputs  %s" % (t, len(files), "ok" if not bad else "CRASH"))
            for e in bad[:1]:
                print(e)
            status |= bool(bad)
    sys.exit(status)


if __name__ == "__main__":
    main()
