#!/usr/bin/env python3
"""What one hostile-but-valid request costs the others, measured on a real pagellm-worker.

    .venv/bin/python tools/bench/hardening_bench.py --worker build/bin/pagellm-worker \
        --model models/SmolLM2-135M-Instruct.Q4_1.gguf [--worker-flag=--max-num-batched-tokens=512]

Starts the worker on a free loopback port and reports, as one JSON object:
  * rss: the worker's resident memory idle (after the same request without stop strings, whose KV
    pages then count as idle) and at its peak while it serves the worst request the limits allow
    for stop strings (kMaxStopStrings strings of kMaxStopBytes in total, at the largest n the
    worker accepts);
  * itl: an ordinary greedy stream's mean inter-token latency alone, next to a companion request
    (n=16, then n=1) without stop strings, and next to the same companion with the maximum stop
    strings; each pair differs only in the stop strings, so its ratio is what they cost others;
  * long_prompt: while a 4,000-token prompt prefills, the longest gap between two tokens of a
    stream already running, and a short request's time to first token.
Greedy, ignore_eos; token-id prompts straight to the worker (no router), so tokenization is not
measured. Timings are client-side (message arrival).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "client"))
import pagellm_client  # noqa: E402  pylint: disable=wrong-import-position

import grpc  # noqa: E402  pylint: disable=wrong-import-position

MAX_STOP_STRINGS = 32  # common/sampling/sampling_params.h
MAX_STOP_BYTES = 4096


def Rss(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def FreePort():
    import socket  # pylint: disable=import-outside-toplevel
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def WorstStops(rng):
    """MAX_STOP_STRINGS strings of MAX_STOP_BYTES bytes in total that never match."""
    each = MAX_STOP_BYTES // MAX_STOP_STRINGS
    return ["\x01" + "".join(rng.choice("qxzj") for _ in range(each - 1))
            for _ in range(MAX_STOP_STRINGS)]


class Worker:
    def __init__(self, binary, model, flags):
        self.port = FreePort()
        cmd = [binary, f"--model={model}", "--host=127.0.0.1", f"--port={self.port}",
               "--metrics_port=0"] + flags
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, _, wpb, wgrpc = pagellm_client.Stubs()
        self.wpb = wpb
        self.gen_pb2 = pagellm_client.Stubs()[0]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = wgrpc.WorkerStub(self.channel)
        deadline = time.time() + 120
        while True:
            try:
                self.info = self.stub.GetModelInfo(self.gen_pb2.GetModelInfoRequest(), timeout=2)
                break
            except grpc.RpcError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the worker did not start: " +
                                       self.proc.stderr.read().decode(errors="replace"))
                time.sleep(0.2)

    def stream(self, prompt, max_tokens, n=1, stop=(), arrivals=None, rid="r"):
        """Runs one request; appends (time, tokens) per message to `arrivals`; returns status."""
        req = self.wpb.WorkerGenerateRequest(request_id=rid)
        req.prompt_token_ids.extend(prompt)
        s = req.sampling
        s.temperature = 0.0
        s.max_tokens = max_tokens
        s.ignore_eos = True
        s.n = n
        s.stop.extend(stop)
        try:
            for resp in self.stub.Generate(req, timeout=600):
                tokens = sum(len(d.token_ids) for d in resp.deltas)
                if arrivals is not None and tokens:
                    arrivals.append((time.perf_counter(), tokens))
            return "OK"
        except grpc.RpcError as e:
            return f"{e.code().name}: {e.details()}"

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def MeanItl(arrivals):
    if len(arrivals) < 3:
        return float("nan")
    times = [t for t, _ in arrivals[1:]]  # from the first token on
    tokens = sum(k for _, k in arrivals[2:])
    return (times[-1] - times[0]) / max(tokens, 1)


def Run(args):
    rng = random.Random(1)
    w = Worker(args.worker, args.model, args.worker_flag)
    out = {"worker_flags": args.worker_flag}
    try:
        vocab = w.info.vocab_size
        prompt = [rng.randrange(1000, vocab - 1) for _ in range(16)]
        # Warm up with the same shape minus the stop strings, so that the KV pages it touches
        # count as idle: what remains is the cost of the stop strings.
        n = w.info.max_parallel_samples
        first_rss = Rss(w.proc.pid)
        w.stream(prompt, args.stop_max_tokens, n=n)
        idle = Rss(w.proc.pid)
        peak = [idle]
        done = threading.Event()

        def Sample():
            while not done.is_set():
                peak[0] = max(peak[0], Rss(w.proc.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=Sample)
        sampler.start()
        status = w.stream(prompt, args.stop_max_tokens, n=n, stop=WorstStops(rng), rid="stops")
        done.set()
        sampler.join()
        out["rss"] = {"start_mb": first_rss / 2**20, "idle_mb": idle / 2**20, "peak_mb": peak[0] / 2**20,
                      "delta_mb": (peak[0] - idle) / 2**20, "n": n, "status": status,
                      "max_tokens": args.stop_max_tokens}

        # Inter-token latency of an ordinary stream.
        def Itl(companion_stops, n=16):
            arrivals = []
            companion = None
            if companion_stops is not None:
                companion = threading.Thread(target=w.stream, args=(
                    prompt, args.itl_tokens * 2, n, companion_stops, None, "companion"))
                companion.start()
                time.sleep(0.5)
            w.stream(prompt, args.itl_tokens, arrivals=arrivals, rid="ordinary")
            if companion is not None:
                companion.join()
            return MeanItl(arrivals) * 1e3

        alone = Itl(None)
        plain = Itl([])
        stops = Itl(WorstStops(rng))
        plain1 = Itl([], n=1)
        stops1 = Itl(WorstStops(rng), n=1)
        out["itl_ms"] = {"alone": alone,
                         "n16_companion": plain, "n16_max_stop_companion": stops,
                         "n16_stop_cost_ratio": stops / plain,
                         "n1_companion": plain1, "n1_max_stop_companion": stops1,
                         "n1_stop_cost_ratio": stops1 / plain1,
                         "n1_max_stop_vs_alone": stops1 / alone}

        # A long prompt arrives while an ordinary stream runs, then a short request: the
        # stream's longest gap between tokens, and the short request's time to first token.
        long_prompt = [rng.randrange(1000, vocab - 1) for _ in range(args.long_prompt)]
        running = []
        ordinary = threading.Thread(target=w.stream, args=(
            prompt, args.itl_tokens * 4, 1, (), running, "running"))
        ordinary.start()
        time.sleep(0.5)
        long_req = threading.Thread(target=w.stream, args=(long_prompt, 1, 1, (), None, "long"))
        t_long = time.perf_counter()
        long_req.start()
        time.sleep(0.3)
        t0 = time.perf_counter()
        arrivals = []
        w.stream(prompt, 2, arrivals=arrivals, rid="short")
        long_req.join()
        t_long_done = time.perf_counter()
        ordinary.join()
        gaps = [b[0] - a[0] for a, b in zip(running, running[1:]) if b[0] > t_long]
        alone_arrivals = []
        t1 = time.perf_counter()
        w.stream(prompt, 2, arrivals=alone_arrivals, rid="short-alone")
        out["long_prompt"] = {"tokens": args.long_prompt,
                              "prefill_s": t_long_done - t_long,
                              "running_stream_max_gap_s": max(gaps) if gaps else float("nan"),
                              "short_ttft_s": arrivals[0][0] - t0,
                              "short_ttft_alone_s": alone_arrivals[0][0] - t1}
    finally:
        w.close()
    print(json.dumps(out, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--worker", default=os.path.join(ROOT, "build", "bin", "pagellm-worker"))
    ap.add_argument("--model",
                    default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--worker-flag", action="append", default=[],
                    help="extra worker flag, e.g. --worker-flag=--max_num_batched_tokens=512")
    ap.add_argument("--stop-max-tokens", type=int, default=64)
    ap.add_argument("--itl-tokens", type=int, default=64)
    ap.add_argument("--long-prompt", type=int, default=4000)
    Run(ap.parse_args())


if __name__ == "__main__":
    main()
