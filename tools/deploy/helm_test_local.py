#!/usr/bin/env python3
"""Runs the chart's `helm test` script here, against a real router and a mock worker.

  helm_test_local.py BIN_DIR RENDERED.yaml

Takes the helm.sh/hook=test Pod of RENDERED.yaml (a `helm template` output), starts
BIN_DIR/pagellm-worker (--load-format mock) and BIN_DIR/pagellm-router on free loopback ports,
the router with an API keys file when the Pod reads one, and runs the Pod's shell script with
its environment, BASE pointing at the local router and KEYS_FILE at the local keys file. The
script is the contract under test (GET /health, then POST /v1/completions returning exactly
MAX_TOKENS tokens); TLS is not exercised here. Exit status: the script's.
"""
import os
import socket
import subprocess
import sys
import tempfile

import yaml


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    bin_dir, rendered = sys.argv[1], sys.argv[2]
    with open(rendered) as f:
        pods = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "Pod" and
                (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    if len(pods) != 1:
        print(f"expected one helm test Pod, found {len(pods)}")
        return 1
    c = pods[0]["spec"]["containers"][0]
    script = c["args"][0]
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    if env["BASE"].startswith("https"):
        print("helm test script uses TLS: not run locally")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        wport, rport, hport = free_port(), free_port(), free_port()
        router_args = []
        if "KEYS_FILE" in env:
            env["KEYS_FILE"] = os.path.join(tmp, "api-keys")
            with open(env["KEYS_FILE"], "w") as f:
                f.write("# keys\n\nsk-local-test-key\nsk-other\n")
            router_args.append(f"--api-keys-file={env['KEYS_FILE']}")
        env.update(BASE=f"http://127.0.0.1:{hport}", WAIT_SECONDS="30", TMPDIR=tmp,
                   PATH=os.environ["PATH"])
        log = open(os.path.join(tmp, "services.log"), "w")
        procs = [subprocess.Popen(
            [os.path.join(bin_dir, "pagellm-worker"), "--load-format=mock", "--host=127.0.0.1",
             f"--port={wport}", "--metrics-port=0", "--threads=1"], stdout=log, stderr=log)]
        try:
            procs.append(subprocess.Popen(
                [os.path.join(bin_dir, "pagellm-router"), "--host=127.0.0.1",
                 f"--port={rport}", f"--http-port={hport}", "--metrics-port=0",
                 f"--workers=127.0.0.1:{wport}"] + router_args, stdout=log, stderr=log))
            p = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True,
                               timeout=90)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        print(p.stdout.strip())
        if p.returncode != 0:
            print(p.stderr.strip())
            log.close()
            print(open(os.path.join(tmp, "services.log")).read()[-3000:])
        return p.returncode


if __name__ == "__main__":
    sys.exit(main())
