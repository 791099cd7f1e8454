#!/usr/bin/env python3
"""End-to-end: a tensor-parallel pagellm-worker (issue 12) as real processes on loopback.

`pagellm-worker --tensor-parallel-size 2` starts its second rank itself (a child process, which
dies with it). The model is the random-weight `llama-tiny` (8 heads, 4 KV heads) in fp32 with the
default model's tokenizer:

  - through a router, the group's greedy outputs equal a single-rank worker's;
  - kill -9 of the follower rank mid-stream: the group's streams end UNAVAILABLE within 5 s,
    the worker turns NOT_SERVING (grpc.health.v1), its load polls fail, and nothing hangs
    (SIGTERM still stops it); the router sends new requests to the other worker.

Run from the repository root: .venv/bin/python tests/e2e/tensor_parallel_e2e_test.py [-v]
"""
import concurrent.futures
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serving_e2e_test as e2e  # noqa: E402  (processes, ports, stubs)

import grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

PROMPTS = [f"Request {i} asks about the {w}" for i in range(4) for w in ("sea", "sky")]


def StartDummyWorker(name, tp):
    def Launch():
        ports = {"port": e2e.FreePort(), "metrics_port": e2e.FreePort()}
        return [os.path.join(e2e.BIN, "pagellm-worker"), "--load-format", "dummy",
                "--dummy-model", "llama-tiny", "--dummy-dtype", "f32", "--tokenizer", e2e.MODEL,
                "--threads", "1", "--num-kv-blocks", "256", "--tensor-parallel-size", str(tp),
                "--host", "127.0.0.1", "--port", str(ports["port"]),
                "--metrics-port", str(ports["metrics_port"]), "--log-level", "warn"], ports

    return e2e.Proc(name, Launch)


def Children(pid):
    """Process ids whose parent is `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def Greedy(stub, prompt, n=24):
    samples, _ = e2e.pagellm_client.Generate(stub, e2e.GEN_PB2, prompt=prompt, max_tokens=n,
                                             temperature=0, ignore_eos=True, timeout=60)
    return samples[0][1]


@unittest.skipIf(e2e.Skip(), "binaries or model missing (run tools/test.sh)")
class TensorParallelServingTest(unittest.TestCase):

    def setUp(self):
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()

    def Start(self, proc):
        self.procs.append(proc)
        return proc

    def test_a_group_serves_what_one_rank_serves_and_fails_fast_when_a_rank_dies(self):
        group = self.Start(StartDummyWorker("tp2", 2))
        single = self.Start(StartDummyWorker("tp1", 1))
        group.WaitServing()
        single.WaitServing()
        followers = Children(group.p.pid)
        self.assertEqual(len(followers), 1, "rank 1 is a child of the worker")
        self.assertEqual(group.Metric("pagellm_tensor_parallel_size"), 2)

        # The same greedy tokens from the group and from one rank, each behind its own router.
        outputs = []
        for w in (group, single):
            router = self.Start(e2e.StartRouter(f"router-{w.name}", [w]))
            router.WaitServing()
            stub = e2e.GEN_GRPC.GenerationStub(e2e.Channel(router.target))
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                outputs.append(list(pool.map(lambda p: Greedy(stub, p), PROMPTS)))
        same = sum(a == b for x, y in zip(*outputs) for a, b in zip(x, y))
        self.assertGreaterEqual(same, 0.95 * 24 * len(PROMPTS))
        self.assertGreater(group.Metric("pagellm_collective_seconds_count"), 0)

        # Streams on the group; kill -9 of rank 1 once they run.
        stub = e2e.GEN_GRPC.GenerationStub(e2e.Channel(
            self.Start(e2e.StartRouter("router-group", [group])).target))
        self.procs[-1].WaitServing()
        threads, outcomes = e2e.StartStreams(stub, PROMPTS[:4], 3000, 120)
        killed_at = time.time()
        os.kill(followers[0], 9)
        for t in threads:
            t.join(timeout=10)
        self.assertFalse(any(t.is_alive() for t in threads), "a stream hangs")
        self.assertEqual(len(outcomes), 4)
        for o in outcomes:
            self.assertIsInstance(o, tuple, "a stream finished although its group lost a rank")
            self.assertEqual(o[0], grpc.StatusCode.UNAVAILABLE)
            self.assertLess(o[1] - killed_at, 5.0)

        # The worker says it cannot serve: health NOT_SERVING and failing load polls.
        health = health_pb2_grpc.HealthStub(e2e.Channel(group.target))
        e2e.WaitFor(lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=1).status ==
                    health_pb2.HealthCheckResponse.NOT_SERVING, 5, "NOT_SERVING")
        with self.assertRaises(grpc.RpcError) as load:
            e2e.WORKER_GRPC.WorkerStub(e2e.Channel(group.target)).GetLoad(
                e2e.WORKER_PB2.GetLoadRequest(), timeout=5)
        self.assertEqual(load.exception.code(), grpc.StatusCode.UNAVAILABLE)

        # A router over both sends new requests to the rank that still works.
        both = self.Start(e2e.StartRouter("router-both", [group, single]))
        both.WaitServing()
        stub = e2e.GEN_GRPC.GenerationStub(e2e.Channel(both.target))
        for p in PROMPTS[:4]:
            self.assertEqual(len(Greedy(stub, p, 8)), 8)

        # Nothing hangs: SIGTERM stops the broken worker.
        group.terminate(timeout=30)


if __name__ == "__main__":
    e2e.Main()
