#!/usr/bin/env python3
"""Static instruction counts of the decode attention kernel (kernels/cuda/attention_decode.cu), from
its sm_90 SASS: the figures docs/cuda_kernels.md quotes for the kernel's per-unit cost.

For each instantiation asked for (head dim D, group size G, lazy rotation, query copies) it prints:
- instructions: the whole kernel, NOPs left out;
- loop: the unit loop (the largest backward branch whose body holds the MMAs);
- unit path: the loop less its conditional blocks that issue a unit ahead, reload a query copy or
  re-rotate the query, i.e. what a unit runs when it does none of these;
- issue block: the conditional block that copies a unit ahead into the ring (its cp.async);
- registers, from ptxas.

Needs nvcc (CUDA 12.8 or newer, for sm_90 and C++20) and nvdisasm. nvdisasm is taken from PATH or
CUDA's bin directory; where neither has it, `--fetch-nvdisasm` installs PyPI's
nvidia-cuda-nvdisasm into a virtual environment under the build directory.

Usage: bench/cuda_decode_sass.py [--build-dir DIR] [--fetch-nvdisasm] [D,G,LAZY,COPIES ...]
(default instantiations: 128,4,0,0 128,4,0,1 128,4,1,0 64,4,0,0 64,4,0,1)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "kernels" / "cuda" / "attention_decode.cu"
DEFAULT_KERNELS = ["128,4,0,0", "128,4,0,1", "128,4,1,0", "64,4,0,0", "64,4,0,1"]
INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"\s*(\.L_x_\d+):")
BRANCH = re.compile(r"BRA(?:\.\S+)?\s+`\((\.L_x_\d+)\)")


def fail(message):
    sys.exit(f"cuda_decode_sass.py: {message}")


def find_tool(name, build_dir, fetch):
    found = shutil.which(name)
    if found:
        return found
    cuda_bin = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / name
    if cuda_bin.exists():
        return str(cuda_bin)
    venv = build_dir / "sass-venv"
    fetched = sorted(venv.glob(f"lib/python*/site-packages/nvidia/cu*/bin/{name}"))
    if fetched:
        return str(fetched[-1])
    if name != "nvdisasm" or not fetch:
        fail(f"{name} is not on PATH nor in CUDA's bin directory" +
             (" (run with --fetch-nvdisasm to install it from PyPI)" if name == "nvdisasm" else ""))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "nvidia-cuda-nvdisasm"], check=True)
    return find_tool(name, build_dir, False)


def mangled(kernel):
    d, g, lazy, copies = kernel
    return f"decode_kernelILi{d}ELi{g}ELb{lazy}ELb{copies}EE"


def parse_kernel(text):
    try:
        d, g, lazy, copies = (int(x) for x in text.split(","))
    except ValueError:
        fail(f"kernel '{text}': expected D,G,LAZY,COPIES, e.g. 128,4,0,1")
    if d not in (16, 32, 64, 128) or not 1 <= g <= 8 or lazy not in (0, 1) or copies not in (0, 1) or (lazy and copies):
        fail(f"kernel '{text}': D is 16, 32, 64 or 128, G 1..8, LAZY and COPIES 0 or 1 and not both 1")
    return d, g, lazy, copies


def functions(sass):
    """Kernel name -> [(address, instruction)], with labels resolved to addresses."""
    out = {}
    for chunk in re.split(r"\n(?=\s*\.text\.)", sass):
        head = chunk.strip().split("\n", 1)[0]
        if not head.startswith(".text."):
            continue
        instructions, labels, pending = [], {}, []
        for line in chunk.split("\n"):
            label = LABEL.match(line)
            if label:
                pending.append(label.group(1))
                continue
            match = INSTRUCTION.match(line)
            if match:
                address = int(match.group(1), 16)
                for name in pending:
                    labels[name] = address
                pending = []
                instructions.append((address, match.group(2)))
        out[head[len(".text."):].rstrip(":")] = (instructions, labels)
    return out


def counts(instructions, labels):
    real = [(a, t) for a, t in instructions if not t.startswith("NOP")]
    loop = None
    for address, text in real:
        branch = BRANCH.search(text)
        if branch and labels.get(branch.group(1), address) < address:
            start = labels[branch.group(1)]
            body = [(a, t) for a, t in real if start <= a <= address]
            if any("HMMA" in t for _, t in body) and (loop is None or len(body) > len(loop)):
                loop = body
    if loop is None:
        return len(real), 0, 0, 0
    issue, index = 0, 0
    addresses = [a for a, _ in loop]
    path = 0
    while index < len(loop):
        address, text = loop[index]
        branch = BRANCH.search(text)
        target = labels.get(branch.group(1)) if branch and text.startswith("@") else None
        if target is not None and address < target <= addresses[-1]:
            block = [t for a, t in loop if address < a < target]
            # A unit issued ahead (cp.async), a query copy reloaded (global loads) or re-rotated (MUFU).
            optional = any(op in t for t in block for op in ("LDGSTS", "LDG.", "MUFU"))
            if optional and not any("HMMA" in t for t in block):
                if any("LDGSTS" in t for t in block):
                    issue = max(issue, len(block))
                path += 1
                index = next(i for i, a in enumerate(addresses) if a >= target)
                continue
        path += 1
        index += 1
    return len(real), len(loop), path, issue


def registers(nvcc, flags):
    result = subprocess.run([nvcc, *flags, "-c", "-Xptxas", "-v", "-o", os.devnull, str(SOURCE)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"nvcc failed on {SOURCE}:\n{result.stderr}")
    out, current = {}, None
    for line in result.stderr.split("\n"):
        entry = re.search(r"Compiling entry function '(\S+)'", line)
        if entry:
            current = entry.group(1)
        used = re.search(r"Used (\d+) registers", line)
        if used and current:
            out[current] = int(used.group(1))
            current = None
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=str(REPO / "build"), help="where the cubin and any venv go")
    parser.add_argument("--fetch-nvdisasm", action="store_true", help="install nvdisasm from PyPI if missing")
    parser.add_argument("kernels", nargs="*", default=DEFAULT_KERNELS, help="D,G,LAZY,COPIES")
    args = parser.parse_args()
    kernels = [parse_kernel(k) for k in args.kernels]
    build_dir = Path(args.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    nvcc = find_tool("nvcc", build_dir, False)
    nvdisasm = find_tool("nvdisasm", build_dir, args.fetch_nvdisasm)
    flags = ["-O3", "-DNDEBUG", "--generate-code=arch=compute_90,code=[sm_90]", "--expt-relaxed-constexpr",
             "-std=c++20", f"-I{REPO}"]
    cubin = build_dir / "attention_decode_sm90.cubin"
    print(f"compiling {SOURCE.relative_to(REPO)} for sm_90 (a minute or so) ...", file=sys.stderr)
    result = subprocess.run([nvcc, *flags, "-cubin", "-o", str(cubin), str(SOURCE)], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"nvcc failed on {SOURCE}:\n{result.stderr}")
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    regs = registers(nvcc, flags)
    found = functions(sass)
    print("| D | G | lazy | copies | registers | instructions | loop | unit path | issue block |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kernel in kernels:
        name = next((n for n in found if mangled(kernel) in n), None)
        if name is None:
            fail(f"no instantiation decode_kernel<{', '.join(map(str, kernel))}> in the cubin")
        total, loop, path, issue = counts(*found[name])
        reg = next((r for n, r in regs.items() if mangled(kernel) in n), "?")
        print(f"| {kernel[0]} | {kernel[1]} | {kernel[2]} | {kernel[3]} | {reg} | {total} | {loop} | {path} | {issue} |")


if __name__ == "__main__":
    main()
