#!/usr/bin/env python3
"""torchref: PyTorch's figures for the design's target, measured in the GPU check's own call.

The GPU check (tools/gpucheck.sh's runner) runs this on the GPU machine, which has PyTorch
and no network: nothing is downloaded. It builds random bf16 weights of the Llama-3.2-1B
shape (16 layers, d 2048, ffn 8192, 32 query and 8 K/V heads of 64, vocab 128256, the head
tied to the embedding) and a bf16 K/V cache of 2560 positions whose first 2048 hold random
keys and values (a committed prefix), and measures on the GPU:

  verify   one 8-node draft-tree verify after those 2048 positions (the computation of the
           design's seed: every node attends to the whole prefix and to its own ancestors,
           at RoPE position pos + depth, and all 8 are written into the cache), in eager
           PyTorch and replayed as a CUDA graph; each the median of --reps timed calls (CUDA
           events) after warm-up. The published anchors are 9250 µs eager and 3200 µs graph.
  gemv     torch's bf16 and fp16 matrix-vector products (cuBLAS) on the model's matrix shapes,
           with 1 and 8 columns (decode, and the verify's 8 nodes), over enough copies of each
           matrix that the L2 cache never holds the next one, each batch queued behind a device
           copy so that launch overhead stays out of the timing: GB/s of weight bytes read.
  read     a streaming read (torch.sum over 4 GiB: every byte read once, one value written)
           and a device-to-device copy (read+write bytes, the convention of Verity's copy
           rate): the bandwidth ceilings.

It writes one JSON object (--out, and stdout) that tools/gpureport prints beside Verity's own
figures. It needs no GPU to print its plan: `torchref.py --plan` prints the shapes, parameter
count, bytes per verify and the draft tree as JSON, with no torch import, which is what this
repository's tests check. Exit status: 0 measured (perhaps with some parts skipped for time),
3 no torch or no CUDA device, 1 a failure.

Usage: torchref.py [--plan] [--out FILE] [--deadline SECONDS] [--reps N] [--seed N]
"""

import argparse
import json
import math
import os
import random
import sys
import time

# The target's shape: Llama-3.2-1B, bf16 weights, tied head.
CONFIG = dict(layers=16, d=2048, ffn=8192, n_q=32, n_kv=8, hd=64, vocab=128256,
              eps=1e-5, theta=500000.0, tree=8, prefix=2048, max_seq=2560)

# Anchors published with the design's seed for PyTorch on an H200 (µs per verify call).
ANCHORS = dict(eager_us=9250, graph_us=3200, floor_us=531)


def matrices(cfg=CONFIG):
    """The model's matrices as (name, rows, cols, count): count is how many the model holds."""
    d, hd, L = cfg["d"], cfg["hd"], cfg["layers"]
    return [
        ("attn_q", cfg["n_q"] * hd, d, L),
        ("attn_k", cfg["n_kv"] * hd, d, L),
        ("attn_v", cfg["n_kv"] * hd, d, L),
        ("attn_output", d, cfg["n_q"] * hd, L),
        ("ffn_gate", cfg["ffn"], d, L),
        ("ffn_up", cfg["ffn"], d, L),
        ("ffn_down", d, cfg["ffn"], L),
        ("output", cfg["vocab"], d, 1),  # the tied head: the embedding table
    ]


def params(cfg=CONFIG):
    """Parameters: every matrix, the embedding (shared with the head), the norms."""
    n = sum(r * c * k for _, r, c, k in matrices(cfg))
    n += 2 * cfg["layers"] * cfg["d"] + cfg["d"]  # two norms per layer, the final norm
    return n


def verify_bytes(cfg=CONFIG, pos=None):
    """Bytes one verify must read at least: every weight once (bf16) and the K/V cache of
    pos + tree positions of every layer (bf16), and write the tree's K/V entries."""
    pos = cfg["prefix"] if pos is None else pos
    weights = 2 * params(cfg)
    kv_read = 2 * cfg["layers"] * 2 * cfg["n_kv"] * (pos + cfg["tree"]) * cfg["hd"]
    return weights, kv_read


def draft_tree(seed, n=8):
    """A random draft tree of n nodes (node 0 the root, every other node's parent earlier),
    as the seed's harness draws one per call: parents, depths and the ancestor mask
    (mask[i][j]: j is i or an ancestor of i)."""
    r = random.Random(seed)
    parents = [-1] + [r.randrange(i) for i in range(1, n)]
    depth = [0] * n
    for i in range(1, n):
        depth[i] = depth[parents[i]] + 1
    mask = [[False] * n for _ in range(n)]
    for i in range(n):
        j = i
        while j >= 0:
            mask[i][j] = True
            j = parents[j]
    return parents, depth, mask


def plan(seed=1):
    cfg = CONFIG
    w, kv = verify_bytes(cfg)
    parents, depth, mask = draft_tree(seed, cfg["tree"])
    return dict(config=cfg, anchors=ANCHORS, params=params(cfg), weight_bytes=w, kv_read_bytes=kv,
                matrices=[dict(name=n, rows=r, cols=c, count=k) for n, r, c, k in matrices(cfg)],
                tree=dict(parents=parents, depth=depth, mask=mask))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


class Clock:
    """Seconds left before the deadline given on the command line."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def measure(args, out):
    import torch  # noqa: deferred, so that --plan and the tests need no torch

    if not torch.cuda.is_available():
        out["error"] = "torch sees no CUDA device"
        return 3
    clock = Clock(args.deadline)
    dev = torch.device("cuda")
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["device"] = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    out["sms"] = props.multi_processor_count
    cfg = CONFIG
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def timed(fn, reps, warm=3):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0)  # µs
        return times

    # --- the verify ---
    t0 = time.monotonic()
    d, hd, nq, nkv, L = cfg["d"], cfg["hd"], cfg["n_q"], cfg["n_kv"], cfg["layers"]
    bf = torch.bfloat16

    # drawn as Verity's fixtures draw them (package fixtures): a matrix N(0, 1/fan_in), the tied
    # embedding N(0, 1/d), a norm's gain 1 + N(0, 0.1²)
    def rnd(rows, cols, std=None):
        std = 1 / math.sqrt(cols) if std is None else std
        return (torch.randn(rows, cols, generator=gen, device=dev, dtype=torch.float32) * std).to(bf)

    def gain(n):
        return (1.0 + torch.randn(n, generator=gen, device=dev) * 0.1).to(bf)

    W = dict(embed=rnd(cfg["vocab"], d, 1 / math.sqrt(d)), final_norm=gain(d), layers=[])
    for _ in range(L):
        W["layers"].append(dict(in_norm=gain(d), post_norm=gain(d), q=rnd(nq * hd, d), k=rnd(nkv * hd, d),
                                v=rnd(nkv * hd, d), o=rnd(d, nq * hd), gate=rnd(cfg["ffn"], d), up=rnd(cfg["ffn"], d),
                                down=rnd(d, cfg["ffn"])))
    pos, T, S = cfg["prefix"], cfg["tree"], cfg["max_seq"]
    kv = []
    for _ in range(L):
        k = torch.zeros(1, nkv, S, hd, device=dev, dtype=bf)
        v = torch.zeros(1, nkv, S, hd, device=dev, dtype=bf)
        k[:, :, :pos] = rnd(nkv * pos, hd, 1.0).view(1, nkv, pos, hd)
        v[:, :, :pos] = rnd(nkv * pos, hd, 1.0).view(1, nkv, pos, hd)
        kv.append((k, v))
    parents, depth, mask = draft_tree(args.seed, T)
    tokens = torch.randint(0, cfg["vocab"], (1, T), generator=gen, device=dev)
    tree_mask = torch.tensor(mask, device=dev)
    depth_t = torch.tensor(depth, device=dev)
    inv = 1.0 / (cfg["theta"] ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    out["build_s"] = time.monotonic() - t0

    def rmsnorm(x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg["eps"])).to(bf) * g

    def rope(x, positions):  # x: (1, heads, T, hd); the two halves rotated (Llama's layout)
        ang = positions.float()[:, None] * inv[None, :]  # (T, hd/2)
        cos, sin = ang.cos()[None, None], ang.sin()[None, None]
        x1, x2 = x[..., : hd // 2].float(), x[..., hd // 2:].float()
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(bf)

    def verify_step(tokens, tree_mask, depth_t):
        x = W["embed"][tokens]  # (1, T, d)
        positions = pos + depth_t
        allowed = torch.cat([torch.ones(T, pos, dtype=torch.bool, device=dev), tree_mask], 1)  # (T, pos+T)
        bias = torch.zeros(T, pos + T, device=dev).masked_fill(~allowed, float("-inf"))
        for l in range(L):
            w = W["layers"][l]
            h = rmsnorm(x, w["in_norm"])
            q = (h @ w["q"].T).view(1, T, nq, hd).transpose(1, 2)
            k = (h @ w["k"].T).view(1, T, nkv, hd).transpose(1, 2)
            v = (h @ w["v"].T).view(1, T, nkv, hd).transpose(1, 2)
            q, k = rope(q, positions), rope(k, positions)
            kc, vc = kv[l]
            kc[:, :, pos:pos + T] = k
            vc[:, :, pos:pos + T] = v
            K, V = kc[:, :, :pos + T], vc[:, :, :pos + T]
            qg = q.view(1, nkv, nq // nkv, T, hd)  # the 4 query heads of each K/V head
            # scores by bf16 products (float accumulation), the masked softmax in float
            s = (qg @ K[:, :, None].transpose(-1, -2)).float() / math.sqrt(hd) + bias
            a = torch.softmax(s, -1).to(bf) @ V[:, :, None]  # (1, nkv, 4, T, hd)
            a = a.view(1, nq, T, hd).transpose(1, 2).reshape(1, T, nq * hd)
            x = x + a @ w["o"].T
            h = rmsnorm(x, w["post_norm"])
            x = x + (torch.nn.functional.silu(h @ w["gate"].T) * (h @ w["up"].T)) @ w["down"].T
        return rmsnorm(x, W["final_norm"]) @ W["embed"].T  # (1, T, vocab)

    ver = dict(pos=pos, nodes=T, parents=parents, depth=depth)
    wbytes, kvbytes = verify_bytes(cfg, pos)
    ver["weight_bytes"], ver["kv_read_bytes"] = wbytes, kvbytes
    out["verify"] = ver
    with torch.inference_mode():
        logits = verify_step(tokens, tree_mask, depth_t)
        torch.cuda.synchronize()
        ver["finite"] = bool(torch.isfinite(logits).all().item())
        eager = timed(lambda: verify_step(tokens, tree_mask, depth_t), args.reps)
        ver["eager_us"], ver["eager_us_all"] = median(eager), eager
        if clock.left() > 20:
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # warm-up on a side stream, as capture requires
                    for _ in range(2):
                        verify_step(tokens, tree_mask, depth_t)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    static = verify_step(tokens, tree_mask, depth_t)
                graph = timed(g.replay, args.reps)
                ver["graph_us"], ver["graph_us_all"] = median(graph), graph
                ver["graph_vs_eager_max_abs"] = float((static.float() - logits.float()).abs().max().item())
            except Exception as e:  # a capture failure is a result, not the end
                out.setdefault("errors", []).append("graph: %s: %s" % (type(e).__name__, e))
        else:
            out.setdefault("skipped", []).append("verify as a CUDA graph: %.0f s left" % clock.left())
    del W, kv
    torch.cuda.empty_cache()

    # --- GEMV on the model's shapes ---
    # A matrix-vector product of a few MB takes the GPU a microsecond or two, less than Python
    # takes to launch it: each timed batch is queued behind a 2 GiB device copy, so that every
    # launch is enqueued before the GPU reaches the first and the events time the GPU alone (a
    # batch whose enqueueing outlasted the copy is marked host_bound).
    l2 = 64 << 20
    gemv = []
    out["gemv"] = gemv
    with torch.inference_mode():
        busy_src = torch.empty(1 << 29, device=dev, dtype=torch.float32)
        busy_dst = torch.empty_like(busy_src)
        busy_us = median(timed(lambda: busy_dst.copy_(busy_src), 3))

        def queued(fn, reps):
            times, bound = [], False
            for _ in range(reps):
                busy_dst.copy_(busy_src)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                start = time.perf_counter()
                fn()
                bound = bound or (time.perf_counter() - start) * 1e6 > busy_us
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0)
            return times, bound

        for dt_name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            for name, rows, cols, _ in matrices(cfg):
                if clock.left() < 15:
                    out.setdefault("skipped", []).append("gemv %s %s: %.0f s left" % (dt_name, name, clock.left()))
                    continue
                mbytes = rows * cols * 2
                copies = max(2, math.ceil(4 * l2 / mbytes))  # the copies together are 4× the L2
                ws = [torch.randn(rows, cols, generator=gen, device=dev, dtype=torch.float32).to(dt) for _ in range(copies)]
                for n in (1, 8):
                    x = torch.randn(n, cols, generator=gen, device=dev, dtype=torch.float32).to(dt)
                    it = [0]

                    def step():
                        torch.nn.functional.linear(x, ws[it[0] % copies])
                        it[0] += 1

                    batch = max(copies, 10)

                    def many():
                        for _ in range(batch):
                            step()

                    many()  # warm-up: cuBLAS's choice of kernel
                    ts, bound = queued(many, max(3, args.reps // 4))
                    us = median(ts) / batch
                    gemv.append(dict(name=name, rows=rows, cols=cols, dtype=dt_name, n=n, us=us, bytes=mbytes,
                                     gb_s=mbytes / us / 1e3, host_bound=bound))
                del ws
                torch.cuda.empty_cache()
        del busy_src, busy_dst
        torch.cuda.empty_cache()

    # --- streaming read and copy ---
    if clock.left() > 8:
        with torch.inference_mode():
            nbytes = 4 << 30
            a = torch.empty(nbytes // 4, device=dev, dtype=torch.float32).normal_(generator=gen)
            ts = timed(lambda: a.sum(), max(3, args.reps // 2))
            out["read"] = dict(bytes=nbytes, us=median(ts), gb_s=nbytes / median(ts) / 1e3, kernel="torch.sum, float32")
            half = nbytes // 2
            src, dst = a[: half // 4], a[half // 4: 2 * (half // 4)]
            ts = timed(lambda: dst.copy_(src), max(3, args.reps // 2))
            out["copy"] = dict(bytes=half, us=median(ts), gb_s=2 * half / median(ts) / 1e3,
                               convention="read+write: 2 x bytes / time")
            del a
    else:
        out.setdefault("skipped", []).append("read and copy: %.0f s left" % clock.left())
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", action="store_true", help="print the shapes and the tree as JSON, without torch")
    ap.add_argument("--out", help="also write the JSON result to this file")
    ap.add_argument("--deadline", type=float, default=120, help="seconds the measurements may take")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions of each measurement")
    ap.add_argument("--seed", type=int, default=1, help="seed of the weights and the draft tree")
    args = ap.parse_args(argv)
    if args.plan:
        json.dump(plan(args.seed), sys.stdout, indent=1)
        print()
        return 0
    start = time.monotonic()
    out = dict(ok=False, anchors=ANCHORS, params=params())
    try:
        import torch  # noqa: F401
    except Exception as e:
        out["error"] = "no torch: %s" % e
        rc = 3
    else:
        try:
            rc = measure(args, out)
        except Exception as e:
            out.setdefault("errors", []).append("%s: %s" % (type(e).__name__, e))
            rc = 1
    out["ok"] = rc == 0
    out["seconds"] = time.monotonic() - start
    text = json.dumps(out, indent=1)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, args.out)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
