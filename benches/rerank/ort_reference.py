"""ONNX Runtime's side of the reranker and bge-small checks: the same int8 ONNX files that
`cargo xtask fetch-models` writes, run by ONNX Runtime, as the reference our engine must
agree with and the speed it is compared to.

    python3 ort_reference.py MODELS_DIR INPUT.json THREADS RUNS OUTPUT.json

INPUT.json holds `pairs` ([query, passage] for ms-marco-MiniLM-L-12-v2), `queries` and
`documents` (texts for bge-small-en-v1.5; queries take its instruction). Batched as the Rust
side batches: sorted by length, batches of `batch` (16 pairs, 32 texts), padded to the longest
of each, truncated at 512 tokens. OUTPUT.json gets the logits, the vectors, and each model's
seconds per timed run (after one warm-up run). Needs onnxruntime==1.32.0, numpy==2.4.6,
tokenizers==0.23.3 (the bench installs them).
"""

import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

BGE_QUERY = "Represent this sentence for searching relevant passages: "


def session(path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def tokenizer(path):
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.enable_truncation(512)
    return tok


def batches(encs, size):
    order = sorted(range(len(encs)), key=lambda i: (len(encs[i].ids), i))
    for start in range(0, len(order), size):
        chunk = order[start : start + size]
        t = max(len(encs[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), t), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, i in enumerate(chunk):
            n = len(encs[i].ids)
            ids[row, :n] = encs[i].ids
            types[row, :n] = encs[i].type_ids
            mask[row, :n] = 1
        yield chunk, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def rerank(sess, tok, pairs):
    encs = tok.encode_batch([(q, p) for q, p in pairs])
    out = [0.0] * len(encs)
    for chunk, feed in batches(encs, 16):
        logits = sess.run(None, feed)[0].reshape(-1)
        for row, i in enumerate(chunk):
            out[i] = float(logits[row])
    return out


def embed(sess, tok, texts):
    encs = tok.encode_batch(texts)
    out = [None] * len(encs)
    for chunk, feed in batches(encs, 32):
        cls = sess.run(None, feed)[0][:, 0, :]
        cls /= np.maximum(np.linalg.norm(cls, axis=1, keepdims=True), 1e-12)
        for row, i in enumerate(chunk):
            out[i] = [float(x) for x in cls[row]]
    return out


def timed(f, runs):
    result = f()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - start)
    return result, times


def main():
    models, input_path, threads, runs, output_path = sys.argv[1:6]
    threads, runs = int(threads), int(runs)
    data = json.load(open(input_path, encoding="utf-8"))
    out = {"onnxruntime": ort.__version__}
    if data.get("pairs"):
        d = os.path.join(models, "ms-marco-MiniLM-L-12-v2")
        sess, tok = session(os.path.join(d, "model.onnx"), threads), tokenizer(os.path.join(d, "tokenizer.json"))
        out["logits"], out["rerank_seconds"] = timed(lambda: rerank(sess, tok, data["pairs"]), runs)
    if data.get("queries") or data.get("documents"):
        d = os.path.join(models, "bge-small-en-v1.5")
        sess, tok = session(os.path.join(d, "model.onnx"), threads), tokenizer(os.path.join(d, "tokenizer.json"))
        texts = [BGE_QUERY + q for q in data.get("queries", [])] + data.get("documents", [])
        vectors, out["embed_seconds"] = timed(lambda: embed(sess, tok, texts), runs)
        n = len(data.get("queries", []))
        out["query_vectors"], out["document_vectors"] = vectors[:n], vectors[n:]
    json.dump(out, open(output_path, "w"))


if __name__ == "__main__":
    main()
