#!/usr/bin/env python3
"""A soak of the whole stack: a random mix of valid, hostile and abandoned requests at once.

A pagellm-router (HTTP and gRPC) in front of two real-model workers whose KV pools are small
(48 blocks of 16 tokens, a 29-block swap pool; one worker preempts by swapping where it can,
the other by recomputing), so that preemption, swapping and chunked prefill happen all the time.
Before the mix, four greedy requests at once that need more than a pool holds make preemption
certain: one worker gets two of them and must preempt.
For SOAK_SECONDS (default 60; run it longer by hand), SOAK_CLIENTS threads (default 10) each
send one request after another, picked at random:

  - OpenAI completions and chat completions, streamed or not, n 1 .. 4, logprobs, stop
    strings, seeds, penalties, echo (with logprobs: the prompt scored too; max_tokens 0),
    vLLM's prompt_logprobs, logit_bias, tool calls (named, "required", "none"), structured output (response_format json_object / json_schema,
    structured_outputs, guided_choice, guided_regex, guided_grammar: a complete answer must
    parse, be one of the choices or fully match the regex or grammar), chats without max_tokens (the rest of the context: the
    workers' max_model_len is what their pools hold for one sequence, 768 of the model's 8,192
    positions; one sample): each answer is checked for its shape (one choice per sample, finish
    reasons, usage that adds up, one logprob per token, no stop string in the text; a chat
    without max_tokens that ends by length ends at the model length);
  - streams that the client drops after a few events, gRPC calls cancelled after their first
    token or given deadlines of 50 ms .. 1 s, beam search over gRPC;
  - invalid requests (wrong types, values out of range, unknown fields, broken JSON, invalid
    UTF-8, a request larger than the KV pool, unknown paths): a 4xx with an OpenAI error object;
  - probes: a greedy completion, a greedy chat, a seeded sampled completion (n = 2) and a
    prompt scored with echo, logprobs and max_tokens 0, answered once at idle before the load;
    under the load their answers must be the same, token for token and logprob for logprob (a
    row's results do not depend on its batch, its preemptions or prefix hits).

Halfway through, worker 1 is killed (SIGKILL) and started again on its port. No request may get
a 5xx, hang (60 s) or a malformed answer, except that while worker 1 is down (until 5 s after
its successor is ready) a stream it was serving may be cut off as unavailable (gRPC
UNAVAILABLE, an SSE error event): those are counted. Requests that are not streamed start over
on worker 0 (the router retries them whole) and must succeed. Afterwards, within 5 s, both workers hold no
KV block (device and swap) and no running, waiting or swapped request, the router has no open
stream and no queue; every process runs and is SERVING, and the router used the successor; the
router's and worker 0's resident memory grew by no more than a quarter plus 64 MiB after the
first quarter of the run; no log holds a prompt's marker word; and the router's access log has
its lines. The summary (requests by kind and outcome, tokens,
preemptions, resident memory) is printed.

Run from the repository root: .venv/bin/python tests/e2e/soak_e2e_test.py [-v]
(CTest runs it; it skips when the binaries or the model are missing, and fails instead when
PAGELLM_REQUIRE_MODELS=1.)
"""
import collections
import http.client
import json
import os
import random
import re
import sys
import threading
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serving_e2e_test as e2e  # noqa: E402  (processes, ports, stubs)
sys.path.insert(0, os.path.join(e2e.ROOT, "tools", "bench"))
from hardening_bench import Rss  # noqa: E402  (a process's resident bytes)

import grpc  # noqa: E402
import openai  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "60"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "10"))
SEED = int(os.environ.get("SOAK_SEED", str(int(time.time()))))
# In every prompt, so that finding it in a log cannot be a coincidence.
MARKER = "Quokkafjord"
WORDS = ("river mountain lantern copper violet orchard harbor thunder meadow quartz falcon "
         "velvet ember glacier saffron compass").split()
TIMEOUT = 60


def Prompt(rng, words=None):
    n = words if words is not None else rng.randint(1, 60)
    text = " ".join(rng.choice(WORDS) for _ in range(n))
    if rng.random() < 0.2:
        text += " " + rng.choice(["naïve café", "日本語のテキスト", "emoji 🦘🌊", "Ωμέγα"])
    return f"{MARKER} {text}"


SOAK_SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 12},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2}},
    "required": ["title", "score"]}
SOAK_CHOICES = ["alpha", "beta", "gamma delta"]
SOAK_REGEX = r"[A-Z][a-z]{1,10}( [a-z]{1,10}){0,3}\."
# SOAK_REGEX's language as a GBNF grammar (its answers are checked with SOAK_REGEX).
SOAK_GRAMMAR = 'root ::= [A-Z] word (" " word){0,3} "."\nword ::= [a-z]{1,10}'
SOAK_TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": SOAK_SCHEMA}},
              {"type": "function", "function": {"name": "noop"}}]


class Soak:
    """The clients' shared state: outcome counts and failures (thread-safe)."""

    def __init__(self, base, stub, model, max_model_len, probes):
        self.base, self.stub, self.model, self.probes = base, stub, model, probes
        self.max_model_len = max_model_len
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()
        self.failures = []
        # When a worker was killed on purpose, and when its successor was ready.
        self.killed_at, self.back_at = None, None
        self.host, self.port = base.split("//")[1].split(":")
        self.client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0,
                                    timeout=TIMEOUT)

    def Count(self, kind, outcome):
        with self.lock:
            self.outcomes[(kind, outcome)] += 1

    def Fail(self, kind, what, unavailable=False):
        """Records a failure. One that says a worker was unavailable is counted instead while
        the killed worker is down (and 5 s after its successor is ready)."""
        with self.lock:
            if unavailable and self.killed_at is not None and (
                    self.back_at is None or time.time() < self.back_at + 5):
                self.outcomes[(kind, "unavailable_while_killed")] += 1
                return
            self.failures.append(f"{kind}: {what}")

    def Post(self, path, body, method="POST"):
        """(status, parsed JSON or None) of one request on its own connection."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=TIMEOUT)
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, None
        finally:
            conn.close()

    # --- valid requests ---
    def Sampling(self, rng, chat):
        body = {"model": self.model, "max_tokens": rng.randint(1, 40)}
        if rng.random() < 0.5:
            body["temperature"] = 0
        else:
            body["temperature"] = round(rng.uniform(0.1, 1.5), 2)
            body["n"] = rng.randint(1, 4)
            if rng.random() < 0.5:
                body["top_p"] = round(rng.uniform(0.05, 1.0), 2)
            if rng.random() < 0.3:
                body["top_k"] = rng.randint(1, 50)
            if rng.random() < 0.3:
                body["seed"] = rng.randint(0, 2**31)
        if rng.random() < 0.3:
            body["presence_penalty"] = round(rng.uniform(-2, 2), 2)
            body["frequency_penalty"] = round(rng.uniform(-2, 2), 2)
        if rng.random() < 0.3:
            body["stop"] = [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            if chat:
                body["logprobs"], body["top_logprobs"] = True, rng.randint(0, 5)
            else:
                body["logprobs"] = rng.randint(0, 5)
        if rng.random() < 0.3:
            body["ignore_eos"] = True
        if rng.random() < 0.1:
            body["logit_bias"] = {str(rng.randint(0, 49151)): round(rng.uniform(-100, 100), 1)
                                  for _ in range(rng.randint(1, 5))}
        if rng.random() < 0.15:  # structured output, in each of its spellings
            body.update(rng.choice([
                {"response_format": {"type": "json_object"}},
                {"response_format": {"type": "json_schema", "json_schema": {
                    "name": "s", "schema": SOAK_SCHEMA}}},
                {"structured_outputs": {"json": SOAK_SCHEMA}},
                {"guided_choice": SOAK_CHOICES},
                {"structured_outputs": {"choice": SOAK_CHOICES}},
                {"guided_regex": SOAK_REGEX},
                {"structured_outputs": {"regex": SOAK_REGEX}},
                {"guided_grammar": SOAK_GRAMMAR},
                {"structured_outputs": {"grammar": SOAK_GRAMMAR}}]))
        return body

    def CheckChoices(self, kind, body, r, prompts):
        n = body.get("n", 1)
        max_tokens = body.get("max_tokens", self.max_model_len)
        choices = r["choices"]
        if sorted(c["index"] for c in choices) != list(range(n * prompts)):
            return self.Fail(kind, f"choice indices {[c['index'] for c in choices]}, n={n}")
        total = 0
        for c in choices:
            text = (c["message"]["content"] or "") if kind.startswith("chat") else c["text"]
            if c["finish_reason"] == "tool_calls":
                # Calls made under the tools' schemas are whole, unless a stop string cut them.
                calls = c["message"].get("tool_calls") or []
                if body.get("tool_choice") in (None, "none") or not calls:
                    self.Fail(kind, "tool_calls without a tool_choice that calls")
                for call in calls if "stop" not in body else []:
                    try:
                        args = json.loads(call["function"]["arguments"])
                    except ValueError:
                        args = None
                    if call["function"]["name"] not in ("lookup", "noop") or \
                            not isinstance(args, dict):
                        self.Fail(kind, "a tool call that is not one of the tools")
            if body.get("echo"):
                if not text.startswith(body["prompt"]):
                    self.Fail(kind, "the echo does not start the text")
                text = text[len(body["prompt"]):]
                if max_tokens == 0 and text:
                    self.Fail(kind, "echo with max_tokens 0 generated text")
            if c["finish_reason"] not in ("stop", "length", "tool_calls"):
                self.Fail(kind, f"finish_reason {c['finish_reason']!r}")
            # A complete structured output (not cut by a stop string) is what was asked for.
            if c["finish_reason"] == "stop" and "stop" not in body and max_tokens > 0:
                choices = (body.get("guided_choice") or
                           body.get("structured_outputs", {}).get("choice"))
                regex = body.get("guided_regex") or body.get("structured_outputs", {}).get("regex")
                if "guided_grammar" in body or "grammar" in body.get("structured_outputs", {}):
                    regex = SOAK_REGEX
                if choices is not None and text not in choices:
                    self.Fail(kind, "a guided choice answered with another text")
                elif regex is not None:
                    if re.fullmatch(regex, text, re.ASCII) is None:
                        self.Fail(kind, "a guided regex answered with a text it does not match")
                elif choices is None and ("response_format" in body or
                                          "structured_outputs" in body):
                    try:
                        value = json.loads(text)
                    except ValueError:
                        value = None
                    if not isinstance(value, dict):
                        self.Fail(kind, "structured output is not a JSON object")
            for s in body.get("stop", []):
                if s in text:
                    self.Fail(kind, f"stop string {s!r} left in the text")
            lp = c.get("logprobs")
            if "logprobs" in body and body["logprobs"] is not False:
                count = len(lp["content"]) if kind.startswith("chat") else len(lp["tokens"])
                if body.get("echo"):  # the prompt's tokens come first, the first unscored
                    count -= r["usage"]["prompt_tokens"]
                    if lp["token_logprobs"][0] is not None or \
                            None in lp["token_logprobs"][1:]:
                        self.Fail(kind, "echoed logprobs: null other than first")
                total += count
                if count > max_tokens or (c["finish_reason"] == "length" and
                                          "max_tokens" in body and count != max_tokens):
                    self.Fail(kind, f"{count} logprobs, max_tokens {max_tokens}, "
                              f"finish {c['finish_reason']}")
            if "prompt_logprobs" in body:
                plp = c.get("prompt_logprobs") or [0]
                if len(plp) != r["usage"]["prompt_tokens"] or plp[0] is not None or \
                        any(len(e) < body["prompt_logprobs"] for e in plp[1:]):
                    self.Fail(kind, f"{len(plp)} prompt logprobs for "
                              f"{r['usage']['prompt_tokens']} prompt tokens")
        u = r["usage"]
        if u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"] or \
                u["completion_tokens"] > n * prompts * max_tokens:
            self.Fail(kind, f"usage {u}")
        # A chat without max_tokens that ran out of length ran to the end of the context.
        # (`choices` above may have been rebound to a guided choice list: read the reply's.)
        finished = [c["finish_reason"] for c in r["choices"]]
        room = self.max_model_len - u["prompt_tokens"]
        if kind == "chat_rest_of_context" and finished == ["length"] * n and \
                u["completion_tokens"] != n * room:
            self.Fail(kind, f"{n} sample(s) ended by length with {u['completion_tokens']} "
                      f"tokens, not {n} x {room}")
        if "logprobs" in body and body["logprobs"] is not False and total != u["completion_tokens"]:
            self.Fail(kind, f"{total} logprobs for {u['completion_tokens']} completion tokens")

    def Completion(self, rng):
        body = self.Sampling(rng, chat=False)
        prompts = 1
        if rng.random() < 0.2:
            body["prompt"] = [Prompt(rng) for _ in range(2)]
            prompts = 2
        else:
            body["prompt"] = Prompt(rng)
            if rng.random() < 0.2:  # with logprobs: the prompt is scored too
                body["echo"] = True
                if rng.random() < 0.3:  # the prompt alone (lm-evaluation-harness)
                    body["max_tokens"] = 0
            if rng.random() < 0.1:
                body["prompt_logprobs"] = rng.randint(0, 3)
        status, r = self.Post("/v1/completions", body)
        self.Count("completion", status)
        if status == 200:
            self.CheckChoices("completion", body, r, prompts)
        elif status != 429:
            self.Fail("completion", f"HTTP {status}: {r}")

    def Chat(self, rng, rest_of_context=False):
        body = self.Sampling(rng, chat=True)
        body["messages"] = [{"role": "system", "content": Prompt(rng, 5)},
                            {"role": "user", "content": Prompt(rng)}]
        kind = "chat"
        if rest_of_context:
            # One sample, so that one such chat surely runs to the end.
            del body["max_tokens"]
            body.pop("n", None)
            kind = "chat_rest_of_context"
        elif rng.random() < 0.1 and not any(  # a named / "required" choice is one already
                k in ("response_format", "structured_outputs") or k.startswith("guided_")
                for k in body):
            body["tools"] = SOAK_TOOLS  # tool calls: a call, a list of calls, or text
            body["tool_choice"] = rng.choice(
                ["required", "none", {"type": "function", "function": {"name": "lookup"}}])
            kind = "chat_tools"
        elif rng.random() < 0.05:  # the rest of the context, which the pool must hold
            # Two samples to the end of the context need twice the pool: the worker runs them
            # one group each, preempting one for the other.
            del body["max_tokens"]
            body["n"] = min(body.get("n", 1), 2)
            kind = "chat_rest_of_context"
        status, r = self.Post("/v1/chat/completions", body)
        self.Count(kind, status)
        if status == 200:
            self.CheckChoices(kind, body, r, 1)
        elif status != 429:
            self.Fail(kind, f"HTTP {status}: {r}")

    def Stream(self, rng):
        """Streamed with the SDK; a third of them dropped after a few chunks."""
        body = self.Sampling(rng, chat=True)
        drop = rng.random() < 0.33
        kwargs = {k: v for k, v in body.items() if k in ("model", "max_tokens", "temperature",
                                                          "n", "top_p", "seed", "stop")}
        stream = self.client.chat.completions.create(
            messages=[{"role": "user", "content": Prompt(rng)}], stream=True,
            stream_options={"include_usage": True}, **kwargs)
        finished, chunks = collections.Counter(), 0
        usage = None
        for chunk in stream:
            chunks += 1
            if drop and chunks >= 3:
                stream.close()
                self.Count("stream", "dropped")
                return
            for c in chunk.choices:
                if c.finish_reason:
                    finished[c.index] += 1
            if chunk.usage is not None:
                usage = chunk.usage
        self.Count("stream", "done")
        n = body.get("n", 1)
        if sorted(finished) != list(range(n)) or any(v != 1 for v in finished.values()):
            self.Fail("stream", f"finish reasons per choice {dict(finished)}, n={n}")
        if usage is None or usage.completion_tokens > n * body["max_tokens"]:
            self.Fail("stream", f"usage {usage}")

    def RawDrop(self, rng):
        """A stream read for a few events, then the socket closed without a word."""
        body = {"model": self.model, "prompt": Prompt(rng), "max_tokens": 40, "stream": True,
                "ignore_eos": True, "n": rng.randint(1, 4), "temperature": 1.0}
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=TIMEOUT)
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status == 200:
            for _ in range(rng.randint(0, 6)):
                r.readline()
        conn.sock.close()
        self.Count("raw_drop", r.status)

    def GrpcCancelled(self, rng):
        req = e2e.GEN_PB2.GenerateRequest(text=Prompt(rng))
        req.sampling.max_tokens, req.sampling.ignore_eos = 60, True
        req.sampling.n = rng.randint(1, 4)
        if rng.random() < 0.5:
            call = self.stub.Generate(req, timeout=rng.uniform(0.05, 1.0))
            try:
                for _ in call:
                    pass
                self.Count("grpc_deadline", "ok")
            except grpc.RpcError as e:
                self.Count("grpc_deadline", e.code().name)
                if e.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED,
                                    grpc.StatusCode.RESOURCE_EXHAUSTED):
                    self.Fail("grpc_deadline", f"{e.code()}: {e.details()}",
                              unavailable=e.code() == grpc.StatusCode.UNAVAILABLE)
        else:
            call = self.stub.Generate(req, timeout=TIMEOUT)
            try:
                next(call)
            except grpc.RpcError as e:
                self.Fail("grpc_cancel", f"{e.code()}: {e.details()}",
                          unavailable=e.code() == grpc.StatusCode.UNAVAILABLE)
            call.cancel()
            self.Count("grpc_cancel", "cancelled")

    def Beam(self, rng):
        width = rng.randint(2, 4)
        try:
            samples, usage = e2e.pagellm_client.Generate(
                self.stub, e2e.GEN_PB2, prompt=Prompt(rng), timeout=TIMEOUT, beam_width=width,
                temperature=0, max_tokens=rng.randint(1, 16))
            self.Count("beam", "ok")
            if not samples or usage is None:
                self.Fail("beam", f"{len(samples)} samples, usage {usage}")
        except grpc.RpcError as e:
            self.Count("beam", e.code().name)
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                self.Fail("beam", f"{e.code()}: {e.details()}",
                          unavailable=e.code() == grpc.StatusCode.UNAVAILABLE)

    # --- invalid requests ---
    def Invalid(self, rng):
        base = {"model": self.model, "prompt": Prompt(rng), "max_tokens": 8}
        path = "/v1/completions"
        mutations = [
            ("max_tokens", "ten"), ("max_tokens", 0), ("max_tokens", -1), ("max_tokens", 10**12),
            ("temperature", "hot"), ("temperature", -1), ("top_p", 0), ("top_p", 2.5),
            ("n", 0), ("n", 10**6), ("n", 1.5), ("logprobs", 50), ("top_k", -5),
            ("presence_penalty", 9), ("repetition_penalty", 0), ("stop", 5),
            ("stop", ["x"] * 100), ("prompt", {"a": 1}), ("prompt", []), ("prompt", ""),
            ("prompt", [49152 + 7]), ("prompt", [-1]), ("prompt", [[1, 2], "x"]),
            ("frobnicate", 1), ("stream_options", {"include_usage": True}),
            ("seed", "s"), ("echo", "yes"), ("best_of", 3),
        ]
        kind = rng.choice(["mutate", "mutate", "truncate", "utf8", "nested", "pool", "chat",
                           "path"])
        body, method = base, "POST"
        if kind == "mutate":
            field, value = rng.choice(mutations)
            body = dict(base, **{field: value})
        elif kind == "truncate":
            raw = json.dumps(base).encode()
            body = raw[:rng.randint(0, len(raw) - 1)]
        elif kind == "utf8":
            body = json.dumps(base).encode().replace(MARKER.encode(), b"\xff\xfe\xc3")
        elif kind == "nested":
            body = b'{"prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        elif kind == "pool":  # beyond the context, or more KV blocks than the pool holds:
            # samples with prompt logprobs run together (without, each runs on its own).
            body = rng.choice([dict(base, prompt=[100] * 900, max_tokens=100),
                               dict(base, prompt=[100] * 200, max_tokens=100, n=4,
                                    prompt_logprobs=1)])
        elif kind == "chat":
            path = "/v1/chat/completions"
            body = {"model": self.model, rng.choice(["messages", "prompt"]): rng.choice(
                ["hi", [{"role": "user", "content": 5}], [{"role": "user", "content": [{"type": "image"}]}],
                 [{"content": "x"}], []])}
        else:
            path, method = rng.choice([("/v1/nope", "POST"), ("/v1/completions", "GET"),
                                       ("/v1/models/x/y", "DELETE")])
        status, r = self.Post(path, body, method)
        self.Count(f"invalid_{kind}", status)
        if not 400 <= status < 500 or status == 429:
            self.Fail(f"invalid_{kind}", f"HTTP {status} for {str(body)[:200]!r}: {r}")
        elif not (isinstance(r, dict) and isinstance(r.get("error"), dict) and
                  r["error"].get("message")):
            self.Fail(f"invalid_{kind}", f"HTTP {status} without an error object: {r}")

    # --- probes ---
    def Probe(self, rng):
        name = rng.choice(sorted(self.probes))
        path, body, expected = self.probes[name]
        status, r = self.Post(path, body)
        self.Count(f"probe_{name}", status)
        if status == 429:
            return
        if status != 200:
            return self.Fail(f"probe_{name}", f"HTTP {status}: {r}")
        if ProbeTexts(r) != expected:
            self.Fail(f"probe_{name}", f"{ProbeTexts(r)!r} under load, {expected!r} at idle")

    def Client(self, index, deadline):
        rng = random.Random(SEED * 1000 + index)
        kinds = [(self.Completion, 20), (self.Chat, 12), (self.Stream, 12), (self.RawDrop, 6),
                 (self.GrpcCancelled, 8), (self.Beam, 5), (self.Invalid, 22), (self.Probe, 15)]
        fns, weights = zip(*kinds)
        # Client 0 starts with a chat that runs to the end of the context: one chat in twenty
        # does, too rare to be sure of in a short run.
        first = index == 0
        while time.time() < deadline:
            fn = self.Chat if first else rng.choices(fns, weights)[0]
            try:
                fn(rng, rest_of_context=True) if first else fn(rng)
            except Exception as e:  # pylint: disable=broad-except
                where = traceback.extract_tb(e.__traceback__)[-1]
                self.Fail(fn.__name__, f"{type(e).__name__}: {e} (line {where.lineno})",
                          unavailable=isinstance(e, (openai.APIError, grpc.RpcError, OSError,
                                                     http.client.HTTPException)))
            first = False


def Preemptions(worker):
    return sum(worker.Metric("pagellm_preemptions_total", f'mode="{m}"') for m in ("swap",
                                                                                  "recompute"))


def ProbeTexts(r):
    """Each choice's text, and its logprobs (the scored prompt) where there are any."""
    return [(c["message"]["content"] if "message" in c else c["text"],
             json.dumps(c.get("logprobs"), sort_keys=True))
            for c in sorted(r["choices"], key=lambda c: c["index"])]


@unittest.skipIf(e2e.Skip(), "binaries or model missing (run tools/test.sh)")
class SoakTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        common = ["--num-kv-blocks", "48", "--swap-space", "0.01", "--log-level", "info"]
        cls.worker1_args = common + ["--preemption-mode", "recompute", "--enable-prefix-caching"]
        cls.workers = [e2e.StartWorker("soak_worker0", common + ["--preemption-mode", "auto"]),
                       e2e.StartWorker("soak_worker1", cls.worker1_args)]
        cls.killed = []
        for w in cls.workers:
            w.WaitServing(timeout=120)
        cls.router = e2e.StartRouter("soak_router", cls.workers, extra=["--log-level", "info"])
        cls.router.WaitServing()

    @classmethod
    def tearDownClass(cls):
        for p in [getattr(cls, "router", None)] + getattr(cls, "workers", []) + \
                getattr(cls, "killed", []):
            if p is not None:
                p.kill()

    def Idle(self):
        for w in self.workers:
            for name, labels in (("pagellm_kv_cache_blocks_used", 'pool="device"'),
                                 ("pagellm_kv_cache_blocks_used", 'pool="swap"'),
                                 ("pagellm_requests_running", ""), ("pagellm_requests_waiting", ""),
                                 ("pagellm_requests_swapped", "")):
                if w.Metric(name, labels) != 0:
                    return False
        return (self.router.Metric("pagellm_router_active_streams") == 0 and
                self.router.Metric("pagellm_router_queue_length") == 0)

    def test_a_random_mix_of_requests_leaves_the_stack_as_it_found_it(self):
        base = f"http://127.0.0.1:{self.router.http_port}"
        stub = e2e.GEN_GRPC.GenerationStub(e2e.Channel(self.router.target))
        info = openai.OpenAI(base_url=base + "/v1", api_key="x").models.list().data[0]
        model, max_model_len = info.id, info.model_extra["max_model_len"]
        # The model's 8,192 positions, lowered to what a pool of 48 blocks of 16 holds.
        self.assertEqual(max_model_len, 48 * 16)
        probe_bodies = {
            "greedy": ("/v1/completions", {"model": model, "prompt": f"{MARKER} The capital of "
                                           "France is", "max_tokens": 24, "temperature": 0,
                                           "ignore_eos": True}),
            "chat": ("/v1/chat/completions", {"model": model, "max_tokens": 24, "temperature": 0,
                                              "messages": [{"role": "user", "content":
                                                            f"{MARKER}: name three rivers."}]}),
            "seeded": ("/v1/completions", {"model": model, "prompt": f"{MARKER} Once upon a",
                                           "max_tokens": 24, "temperature": 0.9, "top_p": 0.95,
                                           "seed": 1234, "n": 2, "ignore_eos": True}),
            # lm-evaluation-harness' loglikelihood request: the prompt scored, nothing generated.
            "scored": ("/v1/completions", {"model": model, "prompt": f"{MARKER} The rain in Spain "
                                           "stays mainly in the plain, said the professor.",
                                           "max_tokens": 0, "echo": True, "logprobs": 2,
                                           "temperature": 0}),
        }
        soak = Soak(base, stub, model, max_model_len, {})
        for name, (path, body) in probe_bodies.items():
            status, r = soak.Post(path, body)
            self.assertEqual(status, 200, r)
            soak.probes[name] = (path, body, ProbeTexts(r))
        # Preemption, made certain rather than left to the random mix: four greedy requests
        # at once, each of which ends up holding 29 of a pool's 48 blocks. However the router
        # spreads them, one worker gets two and must preempt one of them.
        pressure = [{"model": model, "prompt": [200 + i] * 250, "max_tokens": 200,
                     "temperature": 0, "ignore_eos": True} for i in range(4)]
        replies = [None] * len(pressure)

        def press(i):
            replies[i] = soak.Post("/v1/completions", pressure[i])

        pressers = [threading.Thread(target=press, args=(i,)) for i in range(len(pressure))]
        for t in pressers:
            t.start()
        for t in pressers:
            t.join(timeout=2 * TIMEOUT)
        for status, r in replies:
            self.assertEqual(status, 200, r)
            self.assertEqual(r["usage"]["completion_tokens"], 200, r["usage"])
        self.assertGreater(sum(Preemptions(w) for w in self.workers), 0,
                           "two of the four requests on one worker did not preempt")
        procs = [self.router] + self.workers
        print(f"\nsoak: {SECONDS:.0f} s, {CLIENTS} clients, seed {SEED}", flush=True)
        start = time.time()
        threads = [threading.Thread(target=soak.Client, args=(i, start + SECONDS))
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(SECONDS / 4)
        rss_warm = {p.name: Rss(p.p.pid) for p in procs}
        # Halfway, kill -9 worker 1 and start it again on its port.
        time.sleep(start + SECONDS / 2 - time.time())
        victim = self.workers[1]
        victim_preemptions = Preemptions(victim)
        soak.killed_at = time.time()
        victim.kill()
        self.killed.append(victim)
        time.sleep(1)
        successor = e2e.StartWorker("soak_worker1b", self.worker1_args, port=victim.port)
        self.workers[1] = successor
        successor.WaitServing(timeout=120)
        e2e.WaitFor(lambda: self.router.Metric("pagellm_router_workers_ready") == 2, 30,
                    "the router counts the restarted worker ready")
        soak.back_at = time.time()
        for t in threads:
            t.join(timeout=SECONDS + 2 * TIMEOUT)
            self.assertFalse(t.is_alive(), "a client is stuck")
        elapsed = time.time() - start

        e2e.WaitFor(self.Idle, 5.0, "no blocks, no requests and no streams anywhere")
        procs = [self.router, self.workers[0]]  # alive all along (worker 1 was restarted)
        rss_end = {p.name: Rss(p.p.pid) for p in procs}
        for p in procs + [successor]:
            self.assertIsNone(p.p.poll(), f"{p.name} exited")
            p.WaitServing(timeout=5)
        by_kind = collections.defaultdict(dict)
        for (kind, outcome), count in sorted(soak.outcomes.items(), key=str):
            by_kind[kind][str(outcome)] = count
        total = sum(soak.outcomes.values())
        print(f"soak: {total} requests in {elapsed:.0f} s; worker 1 killed at "
              f"{soak.killed_at - start:.0f} s, its successor ready "
              f"{soak.back_at - soak.killed_at:.1f} s later", flush=True)
        for kind, counts in sorted(by_kind.items()):
            print(f"  {kind:22s} {counts}")
        print(f"  {victim.name}: {victim_preemptions} preemptions before it was killed")
        for w in self.workers:
            print(f"  {w.name}: {w.Metric('pagellm_generation_tokens_total')} tokens, "
                  f"{Preemptions(w)} preemptions")
        if soak.failures:
            print("\n".join(soak.failures[:40]))
        for p in procs:
            print(f"  {p.name}: RSS {rss_warm[p.name] / 2**20:.0f} MiB after a quarter, "
                  f"{rss_end[p.name] / 2**20:.0f} MiB at the end")
        self.assertEqual(soak.failures, [], "\n".join(soak.failures[:30]))
        for kind in ("completion", "chat", "chat_rest_of_context", "stream", "probe_greedy",
                     "probe_seeded", "probe_scored", "invalid_mutate", "invalid_pool"):
            self.assertGreater(sum(by_kind[kind].values()), 0, f"no {kind} request ran")
        self.assertGreater(victim_preemptions + sum(Preemptions(w) for w in self.workers), 0,
                           "the pools were meant to be small enough to preempt")
        for p in procs:
            self.assertLess(rss_end[p.name], rss_warm[p.name] * 1.25 + 64 * 2**20, p.name)
        self.assertGreater(successor.Metric("pagellm_generation_tokens_total"), 0,
                           "the router did not use the restarted worker")
        for p in procs + [successor, victim]:
            p.log.flush()
            with open(p.log.name, "rb") as f:
                self.assertNotIn(MARKER.encode(), f.read(), f"{p.name}'s log holds prompt text")
        # The router's access log has a line per HTTP request (and no prompt, checked above).
        with open(self.router.log.name, encoding="utf-8", errors="replace") as f:
            access = [line for line in f if "] access 127.0.0.1:" in line]
        http_requests = sum(n for (kind, _), n in soak.outcomes.items()
                            if not kind.startswith(("grpc_", "beam", "Grpc", "Beam")))
        self.assertGreaterEqual(len(access), http_requests // 2, "too few access log lines")
        self.assertTrue(any('"POST /v1/completions" 200 ' in line for line in access))


if __name__ == "__main__":
    e2e.Main()
