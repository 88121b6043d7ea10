"""The CPU a cell ran on, as its result records it: neural encoders' numbers depend on it.

OpenVINO and oneDNN pick kernels per CPU (AMX bfloat16 tiles, AVX-512 bf16 or VNNI dot products, other
blockings), so a neural encoder's vectors, and the measures over them, can differ in the last digits
between machines; BM25, fusion and evaluation do not. ``cpu()`` names the model and the instruction-set
features that choose those kernels (Linux ``/proc/cpuinfo``; elsewhere ``platform.processor()`` and no
features).
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# Features that change which kernels OpenVINO, oneDNN and onnxruntime run (and so the last digits of a vector).
KERNEL_FEATURES = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


@functools.cache
def cpu() -> dict[str, object]:
    """``{"model": ..., "features": [...]}``: the CPU's model name and which of ``KERNEL_FEATURES`` it has."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"model": platform.processor() or platform.machine(), "features": []}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
        if not line.strip():  # the first processor's block is enough
            break
    flags = set(fields.get("flags", "").split())
    return {
        "model": fields.get("model name", platform.machine()),
        "features": [name for name in KERNEL_FEATURES if name in flags],
    }
