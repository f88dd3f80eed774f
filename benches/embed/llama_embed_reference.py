"""The reference side of the nomic-embed benchmark: llama.cpp (through llama-cpp-python) on the
same GGUF file, the same texts (each after `search_document: `), the same thread count.

Run by `cargo bench -p strata-benches --bench nomic`, which installs llama-cpp-python==0.3.36
first (built from source for this machine without AMX, under target/: see
strata_benches::llama_cpp_python) and passes: the GGUF path, the sentences file, the thread
count, the number of timed runs, and where to write the vectors. llama.cpp packs several texts into one batch of up to n_batch
tokens with no padding, its own best way; vectors are mean-pooled (the file's pooling type)
and L2-normalised. Prints one JSON object: the median seconds of the timed runs.
"""

import json
import math
import statistics
import sys
import time

import llama_cpp
from llama_cpp import Llama

model_path, sentences_path, threads, runs, vectors_path = sys.argv[1:6]
threads, runs = int(threads), int(runs)
texts = ["search_document: " + s for s in json.load(open(sentences_path, encoding="utf-8"))]

llm = Llama(
    model_path=model_path,
    embedding=True,
    n_ctx=2048,
    n_batch=2048,
    n_ubatch=2048,
    n_threads=threads,
    n_threads_batch=threads,
    verbose=False,
)

vectors = llm.embed(texts[:64])
secs = []
for _ in range(runs):
    t0 = time.perf_counter()
    vectors = llm.embed(texts)
    secs.append(time.perf_counter() - t0)


def unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


json.dump([unit(v) for v in vectors], open(vectors_path, "w"))
print(json.dumps({"median": statistics.median(secs), "llama_cpp_python": llama_cpp.__version__}))
