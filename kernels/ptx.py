"""The PTX our Gluon kernel (kernels/fa3.py) writes by hand, where Gluon has no API: the hardware named barriers of
the ping-pong hand-off, the warp vote and branch of FlashAttention-4's conditional rescale, and FlashAttention-4's
exponential on the FMA units. Hopper (sm_90) only; nothing here runs in Triton's CPU interpreter.
"""
from __future__ import annotations

from kernels.gluon_compat import gl, gluon

if gluon is not None:
    _jit = gluon.jit
else:  # no Gluon in this Triton: the functions below stay plain Python and are never launched
    def _jit(fn=None, **_kw):
        return fn if fn is not None else (lambda f: f)


def _constexpr(value):
    return gl.constexpr(value) if gluon is not None else None


# Hardware named barriers for the ping-pong hand-off (FA-3's own mechanism; Gluon has no API for them, so one line of
# PTX each). Ids from TURN_BARRIER_ID on, one per consumer; 0 is the CTA's __syncthreads and Triton's partition
# barriers take the next few, so ours start well above them.
_FIRST_ID, _MAX_CONSUMERS = 8, 3
TURN_BARRIER_ID = _constexpr(_FIRST_ID)
# Both consumers done with the K/V ring (Fa3Config.o_in_ring): the id after the turn barriers of up to three consumers
EPILOGUE_BARRIER_ID = _constexpr(_FIRST_ID + _MAX_CONSUMERS)


@_jit
def named_barrier(ARRIVE: gl.constexpr, ID: gl.constexpr):
    # every thread of the calling consumer warpgroup (4 warps, 128 threads) executes the instruction once;
    # 256 threads take part: this warpgroup and the one it hands the turn to (or takes it from)
    one_per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    ids = gl.full([128], ID, gl.int32, one_per_thread)
    if ARRIVE:  # signal and go on
        gl.inline_asm_elementwise("bar.arrive $1, 256;\n\tmov.b32 $0, $1;", "=r,r", [ids], dtype=gl.int32,
                                  is_pure=False, pack=1)
    else:  # wait until the other warpgroup arrived
        gl.inline_asm_elementwise("bar.sync $1, 256;\n\tmov.b32 $0, $1;", "=r,r", [ids], dtype=gl.int32,
                                  is_pure=False, pack=1)



# Programmatic dependent launch (Fa3Config.pdl): a launch may start while the kernel before it on the stream finishes;
# griddepcontrol.wait holds the calling thread until the grids it depends on have completed and their memory is
# visible, so every partition that touches global memory waits before it does; launch_dependents lets the next such
# launch start its programs as soon as every program of this grid has issued it (or finished).
@_jit
def _every_thread(ASM: gl.constexpr, WARPS: gl.constexpr):
    # one instruction with no operands, executed by every thread of the calling partition's WARPS warps (the mov
    # gives inline_asm_elementwise the result it needs)
    one_per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    zeros = gl.full([32 * WARPS], 0, gl.int32, one_per_thread)
    gl.inline_asm_elementwise(ASM, "=r,r", [zeros], dtype=gl.int32, is_pure=False, pack=1)


@_jit
def grid_dependency_wait(WARPS: gl.constexpr):
    _every_thread("griddepcontrol.wait;\n\tmov.b32 $0, $1;", WARPS)


@_jit
def launch_dependents(WARPS: gl.constexpr):
    _every_thread("griddepcontrol.launch_dependents;\n\tmov.b32 $0, $1;", WARPS)


def _rescale_asm(n: int) -> str:
    """PTX for one thread's n accumulator values: multiply each by its row's α, or skip all n multiplies when the
    warp's vote (the flag operand, the same in every lane) says no row of the warp moved its max."""
    mul = "\n\t".join(f"mul.f32 ${i}, ${i}, ${2 * n + i};" for i in range(n))
    return ("{\n\t.reg .pred %skip;\n\t"
            f"setp.eq.s32 %skip, ${3 * n}, 0;\n\t"
            "@%skip bra.uni SKIP_RESCALE_${:uid};\n\t"
            f"{mul}\n"
            "SKIP_RESCALE_${:uid}:\n\t}")


def _rescale_constraints(n: int) -> str:
    # n outputs, tied to the n accumulator inputs (in place), then n α values and n flag values
    return ",".join(["=f"] * n + [str(i) for i in range(n)] + ["f"] * n + ["r"] * n)


# FA-4's conditional rescale (kernels/fa3.py's _softmax keeps a row's max): a row's max moves only when the new max exceeds it by more than 8 (log2 units), so a
# P value is at most 2^8 = 256 (bf16 and the fp32 sums hold that) and O is rescaled only in the rare tiles that move it.
_RESCALE_ASM_32 = _constexpr(_rescale_asm(32))
_RESCALE_ASM_64 = _constexpr(_rescale_asm(64))
_RESCALE_CONSTRAINTS_32 = _constexpr(_rescale_constraints(32))
_RESCALE_CONSTRAINTS_64 = _constexpr(_rescale_constraints(64))
# a thread's two rows (r and r + 8 of its warp's 16): did either move its max? Then vote across the warp's 32 lanes.
_WARP_ANY_ASM = _constexpr(
    "{\n\t.reg .pred %a, %b;\n\tsetp.neu.f32 %a, $2, 0f3F800000;\n\tsetp.neu.f32 %b, $3, 0f3F800000;\n\t"
    "or.pred %a, %a, %b;\n\tvote.sync.any.pred %a, %a, -1;\n\tselp.s32 $0, 1, 0, %a;\n\tmov.b32 $1, $0;\n\t}")


@_jit
def rescale(acc, alpha, o_row_layout: gl.constexpr, LAZY: gl.constexpr):
    # -- rescale the accumulator by α (per row); with LAZY, a warp whose rows kept their max skips the multiplies --
    a_row = gl.convert_layout(alpha, o_row_layout)
    if LAZY:
        moved = gl.inline_asm_elementwise(_WARP_ANY_ASM, "=r,=r,f,f", [a_row], dtype=gl.int32, is_pure=True, pack=2)
        a_b = gl.broadcast(a_row[:, None], acc)[0]
        moved_b = gl.broadcast(moved[:, None], acc)[0]
        PER_THREAD: gl.constexpr = acc.type.shape[0] * acc.type.shape[1] // 128  # values per thread of the warpgroup
        gl.static_assert(PER_THREAD == 32 or PER_THREAD == 64 or PER_THREAD == 128,
                         "the rescale's PTX is written for 32, 64 or 128 values (head_dim 64, 128, 256)")
        if PER_THREAD >= 64:  # at head_dim 256, two blocks of 64 (each skips on the same warp vote)
            acc = gl.inline_asm_elementwise(_RESCALE_ASM_64, _RESCALE_CONSTRAINTS_64, [acc, a_b, moved_b],
                                            dtype=gl.float32, is_pure=True, pack=64)
        else:
            acc = gl.inline_asm_elementwise(_RESCALE_ASM_32, _RESCALE_CONSTRAINTS_32, [acc, a_b, moved_b],
                                            dtype=gl.float32, is_pure=True, pack=32)
    else:
        acc = acc * a_row[:, None]
    return acc


# FA-4's exponential on the FMA units (Zadouri et al. 2025): 2^x = 2^j · 2^r with j = round(x), r = x − j in [−½, ½];
# j by the 1.5·2²³ trick (two adds, no conversion instruction: those run at the special-function unit's rate too),
# 2^r by a cubic (minimax on [−½, ½]; at most 1.4e-4 relative over [−126, 8]), j added into the exponent bits. x is
# clamped at −126 first (a masked score is −inf: its ≈ 2^−126 rounds to 0 in e4m3 and adds 1e-38 to a row sum).
# 9 instructions on the FMA and integer pipes for one MUFU.EX2 (16 a clock per SM, against 128 FMAs).
_EXP2_CUBIC = ("max.ftz.f32 x, {i}, 0fC2FC0000; add.rn.ftz.f32 t, x, 0f4B400000; sub.rn.ftz.f32 j, t, 0f4B400000; "
               "sub.rn.ftz.f32 r, x, j; fma.rn.ftz.f32 p, r, 0f3D61FB35, 0f3E786ED1; fma.rn.ftz.f32 p, p, r, "
               "0f3F31798E; fma.rn.ftz.f32 p, p, r, 0f3F7FFB4B; mov.b32 e, t; shl.b32 e, e, 23; mov.b32 b, p; "
               "add.s32 b, b, e; mov.b32 {o}, b;")


def _exp2_asm(every: int) -> str:
    """PTX for `every` exponentials of one thread: the last by the cubic, the others by ex2.approx (MUFU.EX2)."""
    body = " ".join(f"ex2.approx.ftz.f32 ${k}, ${every + k};" for k in range(every - 1))
    last = _EXP2_CUBIC.format(i=f"${2 * every - 1}", o=f"${every - 1}")
    return "{ .reg .f32 x, t, j, r, p; .reg .b32 e, b; " + body + " " + last + " }"


EXP_FMA_EVERY = (4, 8, 16)  # the shares written: 1 exponential in 4, 8 or 16 on the FMA units
_EXP2_ASM_4, _EXP2_ASM_8, _EXP2_ASM_16 = (_constexpr(_exp2_asm(k)) for k in EXP_FMA_EVERY)
_EXP2_CONSTRAINTS_4, _EXP2_CONSTRAINTS_8, _EXP2_CONSTRAINTS_16 = (_constexpr(",".join(["=f"] * k + ["f"] * k))
                                                                  for k in EXP_FMA_EVERY)


@_jit
def exp2(x, EVERY: gl.constexpr):
    # 2^x (x ≤ 8: the lazy rescale's bound); with EVERY (4, 8 or 16), 1 value of a thread's every EVERY by the cubic
    # on the FMA units, so the special-function unit, which the e4m3 kernel's softmax keeps as busy as its tensor
    # cores are, has that much less to do; 0: all by ex2.approx
    if EVERY == 4:
        return gl.inline_asm_elementwise(_EXP2_ASM_4, _EXP2_CONSTRAINTS_4, [x], dtype=gl.float32, is_pure=True, pack=4)
    elif EVERY == 8:
        return gl.inline_asm_elementwise(_EXP2_ASM_8, _EXP2_CONSTRAINTS_8, [x], dtype=gl.float32, is_pure=True, pack=8)
    elif EVERY == 16:
        return gl.inline_asm_elementwise(_EXP2_ASM_16, _EXP2_CONSTRAINTS_16, [x], dtype=gl.float32, is_pure=True,
                                         pack=16)
    else:
        return gl.exp2(x)
