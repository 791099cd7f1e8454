#!/usr/bin/env python3
"""TLS, API keys and worker trust end to end, with certificates made at test time by `openssl`.

A pagellm-router serving gRPC and HTTP over TLS, with API keys from a file, in front of
pagellm-workers (mock load format) that require mutual TLS and the worker token:

  - HTTPS (the `openai` SDK trusting the test CA) and gRPC over TLS work; plaintext on the same
    ports is refused;
  - no key, a wrong key, and a key revoked by rewriting the keys file + SIGHUP get 401 /
    UNAUTHENTICATED; a key added the same way works; health checks need none;
  - a direct call to a worker without the router's client certificate fails, and one with the
    certificate but without the worker token gets UNAUTHENTICATED;
  - a worker whose certificate another CA signed is never used by the router.

Run from the repository root: .venv/bin/python tests/e2e/security_e2e_test.py [-v]
"""
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serving_e2e_test as e2e  # noqa: E402  (processes, ports, stubs)

import grpc  # noqa: E402
import openai  # noqa: E402

KEY_A, KEY_B, KEY_C = "key-alpha-" + "a" * 24, "key-bravo-" + "b" * 24, "key-charlie-" + "c" * 22
WORKER_TOKEN = "worker-token-" + "w" * 24


def OpenSsl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def MakePki(d):
    """A CA, a server certificate for 127.0.0.1, a client certificate, and a rogue CA with a
    server certificate of its own. Returns a dict of file paths."""
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for ca in ("ca", "rogue_ca"):
        OpenSsl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN=pagellm test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                cwd=d)
    for name, ca in (("server", "ca"), ("client", "ca"), ("rogue_server", "rogue_ca")):
        OpenSsl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        OpenSsl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{name}.pem", cwd=d)
    return {n: os.path.join(d, n) for n in os.listdir(d)}


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [p for p in (os.path.join(e2e.BIN, "pagellm-worker"),
                               os.path.join(e2e.BIN, "pagellm-router")) if not os.path.exists(p)]
        if missing or shutil.which("openssl") is None:
            if os.environ.get("PAGELLM_REQUIRE_MODELS") == "1":
                raise RuntimeError(f"missing: {missing or 'openssl'}")
            raise unittest.SkipTest(f"missing: {missing or 'openssl'}")
        cls.dir = tempfile.mkdtemp(prefix="pagellm-tls-")
        cls.pki = MakePki(cls.dir)
        p = cls.pki
        cls.keys_file = os.path.join(cls.dir, "keys.txt")
        with open(cls.keys_file, "w") as f:
            f.write(f"# test keys\n{KEY_A}\n{KEY_B}\n")
        cls.token_file = os.path.join(cls.dir, "worker-token")
        with open(cls.token_file, "w") as f:
            f.write(WORKER_TOKEN + "\n")
        worker_tls = ["--tls-cert", p["server.pem"], "--tls-key", p["server.key"],
                      "--tls-client-ca", p["ca.pem"], "--worker-token-file", cls.token_file]
        cls.good = e2e.StartWorker("tls_worker", extra=worker_tls, mock=True)
        cls.rogue = e2e.StartWorker(
            "tls_rogue_worker", mock=True,
            extra=["--tls-cert", p["rogue_server.pem"], "--tls-key", p["rogue_server.key"],
                   "--tls-client-ca", p["ca.pem"], "--worker-token-file", cls.token_file])
        cls.workers = [cls.good, cls.rogue]
        time.sleep(1)  # workers up (their health is behind TLS; the router's is checked below)
        cls.router = e2e.StartRouter(
            "tls_router", cls.workers,
            extra=["--tls-cert", p["server.pem"], "--tls-key", p["server.key"],
                   "--api-keys-file", cls.keys_file, "--worker-token-file", cls.token_file,
                   "--worker-tls-ca", p["ca.pem"], "--worker-tls-cert", p["client.pem"],
                   "--worker-tls-key", p["client.key"]])
        with open(p["ca.pem"], "rb") as f:
            cls.ca = f.read()
        cls.creds = grpc.ssl_channel_credentials(root_certificates=cls.ca)
        cls.router.WaitServing(credentials=cls.creds)
        cls.channel = e2e.Channel(cls.router.target, cls.creds)
        cls.stub = e2e.GEN_GRPC.GenerationStub(cls.channel)
        cls.https = f"https://127.0.0.1:{cls.router.http_port}"

    @classmethod
    def tearDownClass(cls):
        for p in [getattr(cls, "router", None)] + getattr(cls, "workers", []):
            if p is not None:
                p.terminate()
        shutil.rmtree(getattr(cls, "dir", ""), ignore_errors=True)

    def Client(self, key):
        return openai.OpenAI(base_url=self.https + "/v1", api_key=key, max_retries=0, timeout=30,
                             http_client=openai.DefaultHttpxClient(
                                 verify=ssl.create_default_context(cafile=self.pki["ca.pem"])))

    def Generate(self, key=None, stub=None, metadata=None):
        md = list(metadata or [])
        if key is not None:
            md.append(("authorization", f"Bearer {key}"))
        samples, _ = e2e.pagellm_client.Generate(stub or self.stub, e2e.GEN_PB2, prompt="hi",
                                                 max_tokens=3, timeout=30, metadata=md)
        return samples

    def HttpsStatus(self, path, key=None, body=None):
        ctx = ssl.create_default_context(cafile=self.pki["ca.pem"])
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.https + path, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def test_https_and_grpc_over_tls_work_with_a_key(self):
        r = self.Client(KEY_A).completions.create(model=self.Client(KEY_A).models.list().data[0].id,
                                                  prompt="hi", max_tokens=3)
        self.assertEqual(r.usage.completion_tokens, 3)
        self.assertTrue(self.Generate(KEY_B))

    def test_a_body_over_the_limit_gets_413_over_https_too(self):
        # 48 MB against the default 8 MB limit, more than the sockets' buffers hold: urllib
        # writes the whole body before it reads, so it sees the 413 only if the server reads
        # (and drops) the rest of the declared body before it closes.
        status, body = self.HttpsStatus("/v1/completions", key=KEY_A,
                                        body={"prompt": "a" * (48 << 20)})
        self.assertEqual(status, 413, body[:200])
        self.assertIn(b"larger than the limit", body)

    def test_plaintext_is_refused(self):
        with self.assertRaises(Exception):
            urllib.request.urlopen(f"http://127.0.0.1:{self.router.http_port}/health", timeout=5)
        plain = e2e.GEN_GRPC.GenerationStub(e2e.Channel(self.router.target))
        with self.assertRaises(grpc.RpcError) as cm:
            self.Generate(KEY_A, stub=plain)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_missing_and_wrong_keys_are_refused_health_stays_open(self):
        status, body = self.HttpsStatus("/v1/models")
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["error"]["code"], "invalid_api_key")
        self.assertEqual(self.HttpsStatus("/v1/models", key="wrong")[0], 401)
        self.assertEqual(self.HttpsStatus("/v1/completions", key="wrong",
                                          body={"prompt": "hi"})[0], 401)
        for path, body in (("/tokenize", {"prompt": "hi"}), ("/detokenize", {"tokens": [1]})):
            self.assertEqual(self.HttpsStatus(path, body=body)[0], 401, path)
        with self.assertRaises(openai.AuthenticationError):
            self.Client("wrong").completions.create(model="x", prompt="hi")
        self.assertEqual(self.HttpsStatus("/health")[0], 200)
        for key in (None, "wrong"):
            with self.assertRaises(grpc.RpcError) as cm:
                self.Generate(key)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_sighup_reloads_the_keys_file(self):
        self.assertEqual(self.HttpsStatus("/v1/models", key=KEY_B)[0], 200)
        with open(self.keys_file, "w") as f:
            f.write(f"{KEY_A}\n{KEY_C}\n")  # KEY_B revoked, KEY_C added
        self.router.p.send_signal(signal.SIGHUP)
        end = time.time() + 10
        while self.HttpsStatus("/v1/models", key=KEY_B)[0] != 401 and time.time() < end:
            time.sleep(0.1)
        self.assertEqual(self.HttpsStatus("/v1/models", key=KEY_B)[0], 401)
        with self.assertRaises(grpc.RpcError) as cm:
            self.Generate(KEY_B)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.HttpsStatus("/v1/models", key=KEY_C)[0], 200)
        self.assertTrue(self.Generate(KEY_C))
        self.assertEqual(self.router.p.poll(), None, "SIGHUP does not stop the router")

    def test_workers_accept_only_the_router(self):
        p = self.pki
        target = self.good.target
        # No client certificate: the handshake fails.
        no_cert = e2e.Channel(target, grpc.ssl_channel_credentials(root_certificates=self.ca))
        worker_stub = e2e.WORKER_GRPC.WorkerStub(no_cert)
        with self.assertRaises(grpc.RpcError) as cm:
            worker_stub.GetLoad(e2e.WORKER_PB2.GetLoadRequest(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        # The router's certificate but no token.
        with open(p["client.pem"], "rb") as f, open(p["client.key"], "rb") as k:
            creds = grpc.ssl_channel_credentials(root_certificates=self.ca,
                                                 certificate_chain=f.read(), private_key=k.read())
        worker_stub = e2e.WORKER_GRPC.WorkerStub(e2e.Channel(target, creds))
        with self.assertRaises(grpc.RpcError) as cm:
            worker_stub.GetLoad(e2e.WORKER_PB2.GetLoadRequest(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        # With both, it answers (what the router does).
        load = worker_stub.GetLoad(e2e.WORKER_PB2.GetLoadRequest(), timeout=5,
                                   metadata=[("x-pagellm-worker-token", WORKER_TOKEN)])
        self.assertGreater(load.kv_blocks_total, 0)

    def test_a_worker_with_a_certificate_from_another_ca_is_not_used(self):
        for _ in range(8):
            self.assertTrue(self.Generate(KEY_A))
        metrics = self.router.Metrics()
        self.assertIn("pagellm_router_workers_ready 1", metrics)
        # The rogue worker never ran a prompt: its own metrics count none; the good one did.
        self.assertEqual(self.rogue.Metric("pagellm_prompt_tokens_total") or 0, 0)
        self.assertGreater(self.good.Metric("pagellm_prompt_tokens_total") or 0, 0)


if __name__ == "__main__":
    e2e.Main()
