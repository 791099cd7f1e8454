#!/usr/bin/env python3
"""Drives streaming /v1/completions against a pagellm router's OpenAI HTTP port.

Contract: `drive_load.py --url http://127.0.0.1:PORT --seconds S --concurrency C` keeps C
streams open for S seconds (stdlib only) and prints one line of counts by HTTP status.
The mix is chosen so that every worker metric moves:
  * every prompt starts with the same 48-token-plus prefix (3 full KV blocks of 16), so the
    prefix cache gets queried and hit;
  * every other request asks for n=2 parallel samples, whose groups share blocks: under
    `--preemption-mode auto` a worker out of KV blocks swaps those out (mode="swap") and
    recomputes single sequences (mode="recompute");
  * max_tokens varies, so sequences finish at different steps and others get admitted;
  * with --lora NAME, every third request runs that LoRA adapter (its "model");
  * a refused request (e.g. 429, the router's queue full) is counted and retried 0.2 s later.
Exit status 0 unless no request succeeded.
"""
import argparse
import collections
import http.client
import json
import threading
import time
import urllib.parse

PREFIX = ("You are a helpful assistant for a monitoring test. Answer briefly and precisely, "
          "in plain English, without lists or code. Keep every answer under fifty words. ")
TOPICS = ["the moon", "rivers", "bread", "trains", "owls", "copper", "glaciers", "jazz"]


def one_request(host, port, i, counts, lock, lora):
    body = {
        "prompt": f"{PREFIX}Question {i}: tell me about {TOPICS[i % len(TOPICS)]}.",
        "max_tokens": 48 + 24 * (i % 5),
        "temperature": 0.8,
        "seed": i,
        "ignore_eos": True,
        "stream": True,
    }
    if i % 2 == 0:
        body["n"] = 2
    if lora and i % 3 == 1:
        body["model"] = lora
    status = "error"
    try:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        status = str(resp.status)
        while resp.read(4096):  # consume the event stream to its end
            pass
        conn.close()
    except OSError as e:
        status = type(e).__name__
    with lock:
        counts[status] += 1
    if status != "200":
        time.sleep(0.2)  # a refused request (429 from a full queue) is retried, not spun on


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--concurrency", type=int, default=12)
    ap.add_argument("--lora", default="", help="a LoRA adapter the workers serve")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    deadline = time.monotonic() + args.seconds
    counts, lock = collections.Counter(), threading.Lock()
    next_id = iter(range(10**9))
    id_lock = threading.Lock()

    def loop():
        while time.monotonic() < deadline:
            with id_lock:
                i = next(next_id)
            one_request(u.hostname, u.port, i, counts, lock, args.lora)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("drive_load: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0 if counts.get("200", 0) > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
