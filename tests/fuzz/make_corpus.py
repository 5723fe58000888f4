#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses into
tests/fuzz/corpus/<harness>/ from the project's own fixtures (small valid
inputs of every parser, plus near-misses). Run once; the seeds are kept in
the repository (scripts/fuzz.sh copies them to a scratch corpus).

usage: tests/fuzz/make_corpus.py [--pack-dir DIR]
  --pack-dir  a `flotilla-tool pack` of tests/fixtures/k3/ckpt_A (for the
              pack manifest seeds)
"""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def shard(header, data, pad=True, declared=None):
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if declared is None else declared
    return struct.pack("<Q", n) + text + data


def safetensors():
    two = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}}
    put("safetensors_header", "two", shard(two, bytes(range(16))))
    meta = dict(two, __metadata__={"format": "pt"})
    put("safetensors_header", "metadata", shard(meta, bytes(16)))
    put("safetensors_header", "u8", shard(
        {"w": {"dtype": "U8", "shape": [4, 3], "data_offsets": [0, 12]}},
        bytes(12)))
    put("safetensors_header", "f16_empty", shard(
        {"e": {"dtype": "F16", "shape": [0], "data_offsets": [0, 0]},
         "h": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]}},
        bytes(6)))
    put("safetensors_header", "short_by_one",
        shard(two, bytes(16), declared=len(json.dumps(two)) + 7))


def configs():
    k3 = os.path.join(ROOT, "tests", "fixtures", "k3")
    for name, path in [("k3_flat", "ckpt_A/config.json"),
                       ("k3_nested", "ckpt_C/config.nested.json"),
                       ("k3_real", "real-config.reconstructed.json")]:
        put("config", name, open(os.path.join(k3, path), "rb").read())
    put("config", "mixtral", open(os.path.join(
        ROOT, "models", "stories260k-moe", "config.json"), "rb").read())


def index():
    put("index", "two_shards", json.dumps({
        "metadata": {"total_size": 64},
        "weight_map": {"a": "model-00001-of-00002.safetensors",
                       "b": "model-00002-of-00002.safetensors"}}))
    put("index", "skipped_keys", json.dumps({
        "metadata": {"x": [1, {"y": None}]},
        "weight_map": {"a.weight": "s.safetensors"}, "z": True}))


def pack(pack_dir):
    if not pack_dir:
        return
    manifest = open(os.path.join(pack_dir, "manifest.json"), "rb").read()
    table = open(os.path.join(pack_dir, "expert_table.bin"), "rb").read()
    put("pack_manifest", "ckpt_A", struct.pack("<I", len(manifest)) +
        manifest + table)


def tokenizers():
    tiktoken = os.path.join(ROOT, "shared", "tokenizer", "testdata",
                            "cl100k_base.tiktoken")
    lines = open(tiktoken, "rb").read().splitlines()[:300]
    put("tiktoken", "cl100k_head", b"\n".join(lines) + b"\n")
    put("tiktoken", "added_tokens", json.dumps({"added_tokens_decoder": {
        "163584": {"content": "[BOS]", "special": True},
        "163585": {"content": "[EOS]", "special": True}}}))
    stories = os.path.join(ROOT, "models", "stories260k-moe")
    put("tokenizer_json", "stories260k",
        open(os.path.join(stories, "tokenizer.json"), "rb").read())


def requests():
    bodies = {
        "completion": {"model": "m", "prompt": "Once upon a time",
                       "max_tokens": 8, "temperature": 0, "stream": True},
        "chat": {"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"}],
            "logprobs": True, "top_logprobs": 2, "stop": ["\n"]},
        "ids": {"prompt": [1, 2, 3], "top_p": 0.9, "seed": 7, "n": 1},
    }
    for name, body in bodies.items():
        put("completion_request", name, json.dumps(body))


def worker_requests():
    proto = os.path.join(ROOT, "proto")
    # ckpt_A: latent width 64; layer 2 experts 0 and 2 are worker 0's of 2.
    text = ("layer: 2 step_id: 3 row_width: 64 num_rows: 1 " +
            " ".join(["activations: 0.5"] * 64) +
            " assignments { row: 0 expert: 0 weight: 1 }"
            " assignments { row: 0 expert: 2 weight: 0.5 } output: %s")
    for name, kind in [("row_sums", "OUTPUT_KIND_ROW_SUMS"),
                       ("outputs", "OUTPUT_KIND_EXPERT_OUTPUTS")]:
        data = subprocess.run(
            ["protoc", "-I", proto, "--encode=flotilla.v1.ComputeRequest",
             "flotilla/v1/expert.proto"], input=(text % kind).encode(),
            capture_output=True, check=True).stdout
        put("worker_request", name, data)


def main():
    pack_dir = None
    if len(sys.argv) == 3 and sys.argv[1] == "--pack-dir":
        pack_dir = sys.argv[2]
    safetensors()
    configs()
    index()
    pack(pack_dir)
    tokenizers()
    requests()
    worker_requests()


if __name__ == "__main__":
    main()
