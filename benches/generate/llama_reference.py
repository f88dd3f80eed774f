"""The reference side of the generation benchmark: llama.cpp (through llama-cpp-python) on the
same GGUF file, the same prompt token ids, the same thread count, greedy decoding.

Run by `cargo bench -p strata-benches --bench generate`, which installs
llama-cpp-python==0.3.36 first (built from source for this machine without AMX, under
target/, so only the first run pays for the build: see strata_benches::llama_cpp_python) and
passes: the GGUF path, a JSON file of prompt token ids, the number of tokens to generate, the
thread count and the number of timed runs. Prints one JSON object: the medians of prompt and
generation tokens per second, and the generated ids of the last run.
"""

import json
import statistics
import sys
import time

from llama_cpp import Llama

model_path, prompt_path, n_gen, threads, runs = sys.argv[1:6]
n_gen, threads, runs = int(n_gen), int(threads), int(runs)
prompt = json.load(open(prompt_path))

llm = Llama(
    model_path=model_path,
    n_ctx=len(prompt) + n_gen + 16,
    n_threads=threads,
    n_threads_batch=threads,
    n_batch=len(prompt),
    n_ubatch=len(prompt),
    verbose=False,
    seed=0,
)

prompt_rates, gen_rates, ids = [], [], []
for _ in range(runs + 1):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    ids = []
    for _ in range(n_gen):
        tok = llm.sample(top_k=1, temp=0.0)
        ids.append(int(tok))
        llm.eval([tok])
    t2 = time.perf_counter()
    prompt_rates.append(len(prompt) / (t1 - t0))
    gen_rates.append(n_gen / (t2 - t1))

# The first run warms caches and is not counted.
print(json.dumps({
    "prompt_tokens_per_s": statistics.median(prompt_rates[1:]),
    "generated_tokens_per_s": statistics.median(gen_rates[1:]),
    "ids": ids,
}))
