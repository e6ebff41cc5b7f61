#!/usr/bin/env python3
"""Peer figures for bench_cuda_attention: PyTorch scaled_dot_product_attention (flash and cuDNN
backends) at the same Llama-3.1-8B attention shapes (32/8 heads, head dim 128, bf16).

Decode KV bytes count the 8 KV heads once (what a GQA-aware kernel must read). Prints tables;
`--decode` prints the decode table alone, `--prefill` the prefill table alone."""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADS, KV_HEADS, DIM = 32, 8, 128
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def median_ms(fn, repeats=15, inner=5, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / inner)
    return statistics.median(times)


def copy_gbs():
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), 10, 3, 2)
    return 2 * a.numel() / (ms * 1e-3) / 1e9


def timed(backend, q, k, v, causal):
    for mode in ("gqa", "expanded"):
        try:
            if mode == "gqa":
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)  # noqa: E731
            else:
                kx, vx = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
                fn = lambda: F.scaled_dot_product_attention(q, kx, vx, is_causal=causal)  # noqa: E731
            with sdpa_kernel([BACKENDS[backend]]):
                return median_ms(fn), mode
        except Exception as error:  # noqa: BLE001
            last = error
    return None, str(last).splitlines()[0][:60]


def main():
    torch.manual_seed(0)
    bw = copy_gbs()
    print(f"# PyTorch {torch.__version__} SDPA peers on {torch.cuda.get_device_name()}\n")
    print(f"device-to-device copy: {bw:.0f} GB/s (read + write)\n")
    prefill = "--decode" not in sys.argv[1:]
    if prefill:
        print("## Prefill (bf16, 32/8 heads, D 128)")
        print("| shape | backend | mode | µs | TFLOP/s |\n|---|---|---|---:|---:|")
    for name, prior, n, causal in (("4 docs x 2K + 64-token query", 8192, 64, False),
                                   ("5 docs x 2K + 512-token query", 10240, 512, False), ("causal 4K", 0, 4096, True),
                                   ("causal 8K", 0, 8192, True), ("causal 16K", 0, 16384, True),
                                   ("causal 2K", 0, 2048, True)):
        if not prefill:
            break
        keys = prior + n
        q = torch.randn(1, HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, KV_HEADS, keys, DIM, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        pairs = n * (n + 1) / 2 if causal else n * keys
        for backend in BACKENDS:
            ms, mode = timed(backend, q, k, v, causal)
            if ms is None:
                print(f"| {name} | {backend} | failed: {mode} | - | - |")
                continue
            print(f"| {name} | {backend} | {mode} | {ms * 1e3:.1f} | {4 * pairs * DIM * HEADS / (ms * 1e-3) / 1e12:.1f} |")
        sys.stdout.flush()
    if "--prefill" in sys.argv[1:]:
        return
    print("\n## Decode (q_len 1; KV bytes = K+V of 8 KV heads)")
    print("| batch | context | backend | mode | µs | GB/s | % of copy |\n|---:|---:|---|---|---:|---:|---:|")
    for batch in (1, 16, 64):
        for context in (1024, 8192, 32768):
            q = torch.randn(batch, HEADS, 1, DIM, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(batch, KV_HEADS, context, DIM, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            kv_bytes = 2 * k.numel() * 2
            for backend in BACKENDS:
                ms, mode = timed(backend, q, k, v, False)
                if ms is None:
                    print(f"| {batch} | {context} | {backend} | failed: {mode} | - | - | - |")
                    continue
                gbs = kv_bytes / (ms * 1e-3) / 1e9
                print(f"| {batch} | {context} | {backend} | {mode} | {ms * 1e3:.1f} | {gbs:.0f} | {100 * gbs / bw:.0f} % |")
            sys.stdout.flush()
            del q, k, v


if __name__ == "__main__":
    main()
