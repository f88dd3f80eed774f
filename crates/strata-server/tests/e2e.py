"""End-to-end check of `strata serve` with the official `openai` client (run by `cargo xtask serve-e2e`).

Two roles:
  proxy   a logging pass-through between strata serve and the real upstream (llama.cpp's
          server): every request body it forwards is appended to a JSONL log, which is how the
          test sees what the upstream received.
  client  the checks, made with the `openai` package as any application would: plain and
          streamed completions, a conversation far longer than the budget whose answer needs a
          fact from its first turn, the inspection routes, and errors raised as the client's
          own exception types.
"""

import argparse
import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
from openai import OpenAI


def proxy(port, upstream, log):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: the body of every answer ends when the connection closes, so a stream passes
        # through as it comes without re-chunking.
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def forward(self, body):
            req = urllib.request.Request(upstream + self.path, data=body, method=self.command)
            for h in ("Content-Type", "Authorization"):
                if self.headers.get(h):
                    req.add_header(h, self.headers[h])
            try:
                resp = urllib.request.urlopen(req, timeout=600)
            except urllib.error.HTTPError as e:
                resp = e
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
            self.end_headers()
            while True:
                chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()

        def do_GET(self):
            self.forward(None)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock, open(log, "a") as f:
                f.write(json.dumps(json.loads(body)) + "\n")
            self.forward(body)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


FACT = "My locker code at the gym is 4817."
QUESTION = "What is my locker code at the gym? Answer with the number only."

# Filler that shares no words with the question: a long talk about other things.
TOPICS = [
    "the garden beds need compost before the spring planting of tomatoes and basil",
    "our team moved the release of the billing service to next quarter after the audit",
    "the train to the coast was delayed by an hour because of repairs on the bridge",
    "my sister is learning the cello and practises scales every evening after dinner",
    "the recipe for the lentil soup uses cumin, smoked paprika and a squeeze of lemon",
    "we repainted the hallway a pale green and replaced the old brass door handles",
    "the library extended its opening hours on weekends for the exam season",
    "a colleague recommended a novel about a lighthouse keeper on a remote island",
]


def filler(i):
    t = TOPICS[i % len(TOPICS)]
    return f"Update number {i}: {t}. Nothing else changed since the previous update, and {TOPICS[(i + 3) % len(TOPICS)]}."


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def get(base, key, path):
    req = urllib.request.Request(base.removesuffix("/v1") + path, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def client(base, key, mode, history_out):
    def chat(conversation):
        return OpenAI(base_url=base, api_key=key, default_headers={"X-Strata-Conversation": conversation}, max_retries=0)

    models = OpenAI(base_url=base, api_key=key).models.list()
    check(len(models.data) >= 1, f"models.list() gives {[m.id for m in models.data]}")

    # Plain and streamed completions; each reply stored after the user's turn.
    c = chat(f"{mode}-plain")
    messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."},
                {"role": "user", "content": "Name one primary colour."}]
    r = c.chat.completions.create(model="m", messages=messages, max_tokens=24, temperature=0)
    text = r.choices[0].message.content
    check(bool(text and text.strip()), f"a plain completion: {text!r}")
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Name another one."}]
    parts = []
    for chunk in c.chat.completions.create(model="m", messages=messages, max_tokens=24, temperature=0, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    streamed = "".join(parts)
    check(bool(streamed.strip()), f"a streamed completion: {streamed!r}")
    turns = get(base, key, f"/v1/conversations/{mode}-plain/turns")["turns"]
    check([t["role"] for t in turns] == ["system", "user", "assistant", "user", "assistant"], "the turns and both replies are stored")
    check(turns[2]["content"] == text and turns[4]["content"] == streamed, "the stored replies are the ones the client got")

    # A conversation far longer than the budget; the answer needs the first turn.
    c = chat(f"{mode}-long")
    long = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."},
            {"role": "user", "content": FACT}, {"role": "assistant", "content": "Noted, I will remember that."}]
    for i in range(40):
        long += [{"role": "user", "content": filler(i)}, {"role": "assistant", "content": "Thanks for the update."}]
    long.append({"role": "user", "content": QUESTION})
    with open(history_out, "w") as f:
        json.dump({"messages": long}, f)
    r = c.chat.completions.create(model="m", messages=long, max_tokens=16, temperature=0)
    answer = r.choices[0].message.content or ""
    print(f"answer to the late question: {answer!r}")
    ctx = get(base, key, f"/v1/conversations/{mode}-long/context?question=" + urllib.request.quote(QUESTION))
    check("4817" in json.dumps(ctx["messages"]), f"the context for the question holds the fact ({ctx['tokens']} tokens)")
    if mode == "upstream":
        check("4817" in answer, "the upstream's answer uses the fact from the first turn")
    explain = get(base, key, f"/v1/conversations/{mode}-long/explain")
    check(explain["turns"] == len(long) + 1, f"explain: {explain['turns']} turns, tiers {explain['tiers']}")

    # Errors arrive as the client's own exception types.
    try:
        c.chat.completions.create(model="m", messages=[])
        check(False, "an empty message list is refused")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "messages" in str(e), f"an empty message list: 400 ({e.body})")
    try:
        OpenAI(base_url=base, api_key="wrong", max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        check(False, "a wrong key is refused")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, f"a wrong key: 401 ({e.body})")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="role", required=True)
    a = sub.add_parser("proxy")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--upstream", required=True)
    a.add_argument("--log", required=True)
    b = sub.add_parser("client")
    b.add_argument("--base", required=True)
    b.add_argument("--key", required=True)
    b.add_argument("--mode", choices=["upstream", "local"], required=True)
    b.add_argument("--history-out", required=True)
    args = p.parse_args()
    if args.role == "proxy":
        proxy(args.port, args.upstream, args.log)
    else:
        client(args.base, args.key, args.mode, args.history_out)


if __name__ == "__main__":
    main()
