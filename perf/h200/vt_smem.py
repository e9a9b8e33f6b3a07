"""Vᵀ through shared memory: the building block of an in-kernel V transpose for e4m3 (issue 42), checked and timed.

Our e4m3 kernel reads Vᵀ from a separate pass over V (kernels/fa3.py `v_transposed`: wgmma takes 8-bit B operands
K-major only), which earlier runs put at 1.4–2.7 % of the call at head_dim 128 (BENCHMARKS.md §1c). FA-3 transposes each V tile in
shared memory inside the kernel instead, with its producer warpgroup: ldmatrix.trans of 16-bit pairs, byte
permutes, stmatrix (flash-attention's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp, `transpose_V`). This script holds
a Gluon kernel that does the same to one tile per program — global → shared → transposed in shared memory → global —
so the transposer can be checked byte for byte against `v_transposed` and its instructions counted:

1. the V tile (BLOCK_N keys × head_dim bytes) is read as 16-bit byte pairs through a transposed view, with P in
   place's key order (`p_in_place_order`) folded into the view, into wgmma's A-operand layout with 4 consecutive
   keys a thread (k_width=4): ldmatrix.trans;
2. two byte permutes per 4-key group (`prmt` 0x6420 and 0x7531) make rows 2p and 2p+1 of Vᵀ, 4 keys each;
3. they are stored through a view of the Vᵀ tile that puts each 4-key group where it goes: stmatrix.

A plain transpose (the tile loaded into registers and stored through a `.permute((1, 0))` view) lowers to byte-wise
shared-memory accesses: ~440 instructions a thread a tile at head_dim 128 (triton 3.7.1, sm_90), against ~63 here.
The tile goes in 1, 4 or 8 runs of keys (`CHUNKS`: fewer registers a run; triton 3.6 puts a bar.sync between runs).

Put into the FA-3 kernel's producer (a warpgroup at 32 registers: 8 runs; commit 2d1e672), it was right and slower:
the e4m3 kernel at D128 ÷ the shipped call 0.958× at 8K and 0.924× at 16K on an H100 (2026-12-06; BENCHMARKS.md §1c
Phase 14), where the separate pass over V cost nothing measurable that run. It is not in the kernel.

    python -m perf.h200.vt_smem            (a GPU: the check against v_transposed, then both timed)
    python -m perf.h200.vt_smem --sass     (no GPU needed: compiled for sm_90, the transposer's instructions counted)
"""
from __future__ import annotations

import os
import sys

if "--sass" in sys.argv:  # compile only: no launches, no GPU (before kernels.runtime picks the backend)
    os.environ.setdefault("FLASH_LIVE_BACKEND", "aot")

import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

from kernels.runtime import backend, backend_reason  # noqa: E402  first: it picks the backend
import torch  # noqa: E402
import triton  # noqa: E402

from kernels import gluon_compat as compat  # noqa: E402
from kernels.gluon_compat import gl, gluon  # noqa: E402

SHAPES = [(2, 16, 8192, 128), (2, 16, 16384, 128), (2, 16, 1000, 128), (1, 3, 17, 128), (2, 8, 8192, 256)]
BLOCK_N = 128  # the e4m3 kernel's key tile at head_dim 128 and 256 (P in place)
CHUNKS = (1, 4, 8)  # the tile transposed in one run, or in 4 or 8 (8: what fitted the FA-3 producer's 32 registers)


def _jit(fn):
    return gluon.jit(fn) if gluon is not None else fn


@_jit
def _transpose_v_tile(raw, vt, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, IN_PLACE: gl.constexpr,
                      CHUNKS: gl.constexpr):
    # Vᵀ of an 8-bit V tile in shared memory, by one warpgroup: raw (BLOCK_N keys, HEAD_DIM bytes) → vt (HEAD_DIM,
    # BLOCK_N), both 128-byte swizzled (rows of ≥ 128 bytes), so their 16-bit views keep the same swizzle; with
    # IN_PLACE each tile's keys in p_in_place_order (P's keys as P in place hands them to P·V). As FA-3 does it
    # (flash-attention's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp, transpose_V), in CHUNKS runs of BLOCK_N ÷ CHUNKS
    # keys (a run's bytes are BLOCK_N·HEAD_DIM ÷ (128·CHUNKS) registers a thread: the FA-3 kernel's producer has 32):
    # 1. a run is read as 16-bit byte pairs through a transposed view, the key order folded into the view, into
    #    wgmma's A-operand layout with 4 consecutive keys a thread (k_width=4): ldmatrix.trans;
    # 2. two byte permutes per 4-key group (prmt 0x6420 and 0x7531) make rows 2p and 2p+1 of Vᵀ, 4 keys each;
    # 3. they are stored through a view of the Vᵀ tile that puts each 4-key group where it goes: stmatrix.
    # (A plain transpose, the tile loaded into registers and stored through a .permute((1, 0)) view, lowers to
    # byte-wise shared-memory accesses: ~440 instructions a thread a tile at head_dim 128, against ~63.)
    RUN: gl.constexpr = BLOCK_N // CHUNKS
    pairs: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=4)
    raw16 = raw._reinterpret(gl.int16, [BLOCK_N, HEAD_DIM // 2], pairs)  # [key, p]: bytes (V[key][2p], V[key][2p+1])
    # [p, q] of Vᵀ's byte pairs: t[p, 4a + 2b + c] goes to row 2p + b, byte pair 2a + c
    vt16 = vt._reinterpret(gl.int16, [HEAD_DIM, BLOCK_N // 2], pairs) \
        .reshape([HEAD_DIM // 2, 2, BLOCK_N // 4, 2]).permute((0, 2, 1, 3)).reshape([HEAD_DIM // 2, BLOCK_N])
    if IN_PLACE:  # position q reads key c(q) = q0 + 8·q1 + 2·q2 + 4·q3 + 16·(q >> 4) (p_in_place_order)
        raw16 = raw16.reshape([BLOCK_N // 16, 2, 2, 2, 2, HEAD_DIM // 2]).permute((0, 2, 3, 1, 4, 5)) \
            .reshape([BLOCK_N, HEAD_DIM // 2])
    for c in gl.static_range(CHUNKS):
        # a thread's two registers hold positions q..q+3 (q a multiple of 4) of one byte pair p: ldmatrix.trans
        r = raw16.permute((1, 0)).slice(c * RUN, RUN, 1).load(a_op)  # [p, q] of the run's positions q
        # bytes 0, 2, 4, 6 of the two registers: row 2p at positions q..q+3; bytes 1, 3, 5, 7: row 2p + 1
        t = gl.inline_asm_elementwise("prmt.b32 $0, $2, $3, 0x6420;\n\tprmt.b32 $1, $2, $3, 0x7531;", "=r,=r,r,r",
                                      [r], dtype=gl.int16, is_pure=True, pack=4)
        vt16.slice(c * RUN, RUN, 1).store(t)  # stmatrix


@_jit
def _vt_tiles(V, OUT, seq_len, padded, heads, s_b, s_h, s_n, o_bh, o_d,
              BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, IN_PLACE: gl.constexpr, CHUNKS: gl.constexpr):
    # one tile of BLOCK_N keys of one (batch, head): V's rows (int8 views of e4m3; keys past seq_len read as zeros)
    # into shared memory, transposed there, written as columns of OUT (B·H, HEAD_DIM, padded)
    tile = gl.program_id(0)
    bh = gl.program_id(1)
    io: gl.constexpr = gl.BlockedLayout([1, 16], [16, 2], [4, 1], [1, 0])
    keys = tile * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, io))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, io))
    src = V + (bh // heads).to(gl.int64) * s_b + (bh % heads).to(gl.int64) * s_h
    x = gl.load(src + keys[:, None].to(gl.int64) * s_n + dims[None, :], mask=keys[:, None] < seq_len, other=0)
    raw = gl.allocate_shared_memory(gl.int8, [BLOCK_N, HEAD_DIM],
                                    gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2))
    raw.store(x)
    vt = gl.allocate_shared_memory(gl.int8, [HEAD_DIM, BLOCK_N],
                                   gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2))
    compat.partition_barrier()
    _transpose_v_tile(raw, vt, BLOCK_N, HEAD_DIM, IN_PLACE, CHUNKS)
    compat.partition_barrier()
    rows = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(1, io))
    cols = tile * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, io))
    y = vt.load(io)
    gl.store(OUT + bh.to(gl.int64) * o_bh + rows[:, None].to(gl.int64) * o_d + cols[None, :], y,
             mask=cols[None, :] < padded)


def vt_smem(v: torch.Tensor, in_place: bool = True, block_n: int = BLOCK_N, chunks: int = 1) -> torch.Tensor:
    """Vᵀ of an 8-bit v (B, H, N, D), D 128 or 256 with unit stride: (B, H, D, N padded to whole tiles), each tile's
    keys in P in place's order when in_place (as kernels/fa3.py v_transposed(v, block_n) returns it)."""
    batch, heads, seq_len, head_dim = v.shape
    if v.element_size() != 1 or head_dim not in (128, 256) or v.stride(3) != 1:
        raise ValueError(f"vt_smem takes 8-bit (B, H, N, 128 or 256) with unit-stride head_dim; got "
                         f"{tuple(v.shape)} {v.dtype} strides {v.stride()}")
    padded = -(-seq_len // block_n) * block_n
    raw = v.view(torch.int8)
    out = torch.empty((batch, heads, head_dim, padded), dtype=torch.int8, device=v.device)
    _vt_tiles[(padded // block_n, batch * heads)](raw, out, seq_len, padded, heads, *raw.stride()[:3],
                                                  out.stride(1), out.stride(2), BLOCK_N=block_n, HEAD_DIM=head_dim,
                                                  IN_PLACE=in_place, CHUNKS=chunks, num_warps=4)
    return out.view(v.dtype)


def sass_counts(chunks: int) -> int:
    """Compile one launch for sm_90 (no GPU) and count the transposer's instructions, from its first LDSM to its
    last store into the Vᵀ tile (STSM), and the whole kernel's shared-memory accesses and registers."""
    from bench import triton_private
    from bench.compile_check import _cubin_facts
    v = torch.zeros((1, 1, 256, 128), dtype=torch.float8_e4m3fn)
    with triton_private.captured_launches() as launches:
        vt_smem(v, chunks=chunks)
    fn, args, kwargs = launches[0]
    kernel = triton_private.compile_launch(fn, args, kwargs, 90)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        listing = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True, timeout=120).stdout
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+([A-Z0-9_.]+)", listing, re.M)
    first = next((i for i, op in enumerate(ops) if op.startswith("LDSM")), None)
    last = max((i for i, op in enumerate(ops) if op.startswith(("STSM", "STS"))), default=None)
    if first is None or last is None or last < first:
        print("no LDSM … STSM section found: the transposer did not lower as intended")
        print(dict(Counter(op for op in ops if op.startswith(("LDS", "STS", "PRMT")))))
        return 1
    section = Counter(op.split(".")[0] for op in ops[first:last + 1])
    print(f"triton {triton.__version__}, sm_90, head_dim 128, {BLOCK_N}-key tile in {chunks} run(s), P in place's "
          f"order: the transposer takes {last + 1 - first} instructions a thread a tile: "
          f"{dict(section.most_common())}; the kernel {_cubin_facts(kernel.asm['cubin'], sass=False)}")
    print("whole kernel's shared-memory ops:", dict(Counter(op for op in ops if op.startswith(("LDS", "STS")))))
    return 0 if not any(op.startswith(("LDS.U8", "STS.U8", "LDS.S8", "STS.S8")) for op in ops[first:last + 1]) else 1


def check_and_time() -> int:
    from kernels.fa3 import v_transposed
    from perf.h200.decode_speed import time_rounds  # interleaved rounds, the order rotated, medians
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    wrong = 0
    for batch, heads, n, d in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(n + d)
        v = (torch.randn(batch, heads, n, d, device="cuda", generator=gen) * 4).to(torch.float8_e4m3fn)
        for in_place in (True, False):
            ref = v_transposed(v, BLOCK_N if in_place else None).view(torch.uint8)
            for chunks in CHUNKS:
                ours = vt_smem(v, in_place, chunks=chunks).view(torch.uint8)
                # (in P in place's order the last tile's positions past n may hold keys below n: whole tiles)
                length = ref.shape[-1]
                same = torch.equal(ours[..., :length], ref) and not ours[..., length:].any()
                wrong += not same
                print(f"check B{batch} H{heads} N{n} D{d} {'P in place order' if in_place else 'key order'} in "
                      f"{chunks} run(s): {'same bytes' if same else 'DIFFERENT'}")
    if wrong:
        print(f"{wrong} checks differ: nothing is timed")
        return 2
    for batch, heads, n, d in SHAPES[:2]:
        v = torch.randn(batch, heads, n, d, device="cuda").to(torch.float8_e4m3fn)
        us = time_rounds({"v_transposed": lambda: v_transposed(v, BLOCK_N), "vt_smem": lambda: vt_smem(v),
                          "vt_smem 8 runs": lambda: vt_smem(v, chunks=8)}, 3, 100)
        nbytes = 2 * v.numel()
        line = ", ".join(f"{name} {t:.1f} µs ({nbytes / t / 1e3:.0f} GB/s read + write)" for name, t in us.items())
        print(f"time B{batch} H{heads} N{n} D{d}: {line}")
    return 0


def main() -> int:
    if compat.GLUON_IMPORT_ERROR:
        print(f"Gluon does not import here: {compat.GLUON_IMPORT_ERROR}")
        return 1
    if "--sass" in sys.argv:
        return max(sass_counts(chunks) for chunks in CHUNKS)
    if backend() != "cuda":
        print(f"python -m perf.h200.vt_smem needs a CUDA GPU (or --sass): {backend_reason()}")
        return 1
    return check_and_time()


if __name__ == "__main__":
    sys.exit(main())
