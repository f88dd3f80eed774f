"""A stand-in for chats of long messages, made from LoCoMo: each dated session's turns joined
per speaker, two long messages a session (about 1,750 characters each on the first
conversation), dated as the session, with the questions' evidence mapped to the messages that
now hold it. Issue 57 measures the reranker's cost on it.

    python examples/long_messages.py ../shared/datasets/locomo/locomo10.json long.jsonl --limit 5
    strata eval --dataset long.jsonl --strategy tiered --mode aware --reranker msmarco
"""

import argparse
import json
import re
import warnings

import strata


def joined(conversation: dict) -> dict:
    messages, holder = {}, {}
    for t in conversation["turns"]:
        session = re.match(r"D(\d+):", t["id"])
        key = (session.group(1) if session else "0", t.get("speaker") or t["role"])
        if key not in messages:
            messages[key] = {"id": f"S{key[0]}-{len(messages)}", "speaker": key[1], "lines": []}
            if t.get("timestamp"):
                messages[key]["timestamp"] = t["timestamp"]
        messages[key]["lines"].append(t["content"])
        holder[t["id"]] = messages[key]["id"]
    first = next(iter(messages.values()))["speaker"]
    turns = [
        {k: v for k, v in m.items() if k != "lines"}
        | {"role": "user" if m["speaker"] == first else "assistant", "content": "\n".join(m["lines"])}
        for m in messages.values()
    ]
    probes = []
    for p in conversation.get("probes", []):
        evidence = sorted({holder[e] for e in p.get("evidence", []) if e in holder})
        probes.append({k: v for k, v in p.items() if k != "evidence"} | ({"evidence": evidence} if evidence else {}))
    return {"id": conversation["id"], "turns": turns, "probes": probes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("out", help="a .jsonl file")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LoCoMo's four evidence ids that name no turn
        conversations = strata.load(args.locomo)[: args.limit]
    with open(args.out, "w") as f:
        for c in conversations:
            f.write(json.dumps(joined(c.to_dict())) + "\n")


if __name__ == "__main__":
    main()
