#!/usr/bin/env python3
"""A minimal Python client for pagellm, on grpcio with stubs generated from proto/pagellm/v1.

    .venv/bin/python tools/client/pagellm_client.py --server localhost:50051 \
        --prompt "The capital of France is" --max-tokens 16 --temperature 0
    .venv/bin/python tools/client/pagellm_client.py --chat "What is the capital of France?"

The stubs are generated on first use into .cache/pystubs with grpc_tools.protoc (the grpcio-tools
package), so nothing generated is committed. Import `Stubs()` and `Generate()` from here to use
it as a library (the end-to-end tests do).
"""
import argparse
import importlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(ROOT, "proto")
STUB_DIR = os.path.join(ROOT, ".cache", "pystubs")
PROTOS = ["pagellm/v1/generation.proto", "pagellm/v1/worker.proto"]


def Stubs():
    """Returns (generation_pb2, generation_pb2_grpc, worker_pb2, worker_pb2_grpc)."""
    newest = max(os.path.getmtime(os.path.join(PROTO_DIR, p)) for p in PROTOS)
    marker = os.path.join(STUB_DIR, "pagellm", "v1", "worker_pb2_grpc.py")
    if not os.path.exists(marker) or os.path.getmtime(marker) < newest:
        from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
        os.makedirs(STUB_DIR, exist_ok=True)
        args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={STUB_DIR}",
                f"--grpc_python_out={STUB_DIR}"] + [os.path.join(PROTO_DIR, p) for p in PROTOS]
        if protoc.main(args) != 0:
            raise RuntimeError("grpc_tools.protoc failed")
        for d in ("pagellm", "pagellm/v1"):
            open(os.path.join(STUB_DIR, d, "__init__.py"), "a").close()
    if STUB_DIR not in sys.path:
        sys.path.insert(0, STUB_DIR)
    return tuple(importlib.import_module(f"pagellm.v1.{m}")
                 for m in ("generation_pb2", "generation_pb2_grpc", "worker_pb2", "worker_pb2_grpc"))


def Generate(stub, gen_pb2, prompt=None, chat=None, token_ids=None, timeout=None, metadata=None,
             **sampling):
    """Streams one request; returns ({sample_index: (text, token_ids, finish_reason)}, usage)."""
    req = gen_pb2.GenerateRequest()
    if chat is not None:
        for role, content in chat:
            req.chat.messages.add(role=role, content=content)
    elif token_ids is not None:
        req.token_ids.ids.extend(token_ids)
    else:
        req.text = prompt
    for k, v in sampling.items():
        if isinstance(v, (list, tuple)):
            getattr(req.sampling, k).extend(v)
        else:
            setattr(req.sampling, k, v)
    samples, usage = {}, None
    for resp in stub.Generate(req, timeout=timeout, metadata=metadata):
        for d in resp.deltas:
            text, ids, reason = samples.get(d.sample_index, ("", [], 0))
            samples[d.sample_index] = (text + d.text, ids + list(d.token_ids),
                                       d.finish_reason or reason)
        if resp.finished:
            usage = resp.usage
    return samples, usage


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="localhost:50051")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--chat", help="a user message, rendered with the model's chat template")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--n", type=int, default=1)
    args = ap.parse_args()
    import grpc  # pylint: disable=import-outside-toplevel
    gen_pb2, gen_grpc, _, _ = Stubs()
    stub = gen_grpc.GenerationStub(grpc.insecure_channel(args.server))
    info = stub.GetModelInfo(gen_pb2.GetModelInfoRequest())
    print(f"model {info.model_name}: vocab {info.vocab_size}, context {info.max_model_len}")
    chat = [("user", args.chat)] if args.chat else None
    samples, usage = Generate(stub, gen_pb2, prompt=args.prompt, chat=chat,
                              max_tokens=args.max_tokens, temperature=args.temperature, n=args.n)
    for i in sorted(samples):
        text, _, reason = samples[i]
        print(f"[{i}] {text!r} ({gen_pb2.FinishReason.Name(reason)})")
    print(f"usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens")


if __name__ == "__main__":
    main()
