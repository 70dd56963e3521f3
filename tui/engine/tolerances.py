"""How close is close enough: each output's (atol, rtol) by dtype, the floor no atol goes below,
and the error metrics that decide pass or fail."""

from __future__ import annotations

from typing import Any

from ..model.config import SdpaConfig
from ..model.results import ErrorMetrics

# (atol, rtol) of the output. fp16 is the seed's; bf16 has 8 mantissa bits against fp16's 11,
# so its rounding of O alone is ~8x larger: we allow 4x the absolute and torch's bf16 rtol.
# FP8 (E4M3, 3 mantissa bits) scales each tensor by its amax, so its error scales with the
# tensor's range: atol there is a fraction of max |reference| (2^-4, half an E4M3 step at the
# top of the range), rtol one E4M3 step. Measured on the H200: ~3.6-4% of max |O|.
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp16": (5e-3, 3e-3),
    "bf16": (2e-2, 1.6e-2),
    "fp8_e4m3": (2**-4, 2**-3),
}
# Gradients are sums over a whole sequence, so their size grows with it: atol is a fraction of
# max |reference gradient| for every dtype. About 4-8x what the H200 gave (bf16: 0.3-0.4% of
# the max, fp16 0.05%), so a wrong mask or a missing term fails and rounding does not.
GRAD_TOLERANCES: dict[str, tuple[float, float]] = {
    "fp16": (2**-8, 2**-7),
    "bf16": (2**-5, 2**-4),
    "fp8_e4m3": (2**-3, 2**-2),
}
RELATIVE_ATOL = ("fp8_e4m3",)  # dtypes whose output atol is a fraction of max |reference|
# An output whose reference is exactly zero (a backward over one key: dQ = dK = 0) comes out of
# cuDNN as the fp32 residue of terms that cancel in its accumulators: 2.8e-7 and 9.8e-7 on the
# H200, against an atol of 3e-32 from max |reference|. So atol never goes below this many fp32
# units of the output's natural size from the inputs (one product of maxima, no sums: the floor
# only binds where the share-of-max rule gives next to nothing; 1e-5 to 1e-4 for N(0,1) inputs).
ATOL_FLOOR_FP32_UNITS = 16
# A backward reads O as the forward stored it: D = rowsum(dO * O) carries O's rounding to its
# dtype, and dS = P (dP - D) with it. Where the true gradient is zero (one key kept: s_kv=1, or
# s_q=1 under a top-left causal mask) that rounding is all there is of dQ and dK: with dropout,
# O = V / (1 - p) is not representable, so its residue is one unit of O's dtype, not of fp32 (the
# soak's s_q=1 dropout backward: dK 5.7e-4 against an atol of 3.7e-6 from fp32 units). So the
# atol of dQ and dK never goes below that residue's bound: STORED_O_SIGMAS rounding errors (each
# at most a unit roundoff of O) summed in quadrature over a row, times the scale and max |K| or |Q|.
UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp8_e4m3": 2.0**-4}
STORED_O_SIGMAS = 4 / 3**0.5  # four standard deviations of a rounding error uniform in one unit


def tolerance(config: SdpaConfig, ref: Any, grad: bool = False, floor: float = 0.0) -> tuple[float, float]:
    """(atol, rtol) for comparing with `ref`, the atol made absolute where it is relative, and
    never below `floor` (atol_floor)."""
    atol, rtol = (GRAD_TOLERANCES if grad else TOLERANCES)[config.dtype]
    if grad or config.dtype in RELATIVE_ATOL:
        atol = atol * max(largest(ref), 1e-30)
    return max(atol, floor), rtol


def output_tolerance(
    config: SdpaConfig, output: str, ref: Any, inputs: Any, grad: bool = False
) -> tuple[float, float]:
    """(atol, rtol) of one output against `ref`, its atol never below what the size of `inputs` (a
    passes.Inputs) allows (atol_floor); `grad` for a gradient (relative to the reference's range)."""
    floor = atol_floor(config, output, inputs.q, inputs.k, inputs.v, inputs.d_o, inputs.o)
    return tolerance(config, ref, grad=grad, floor=floor)


def atol_floor(
    config: SdpaConfig, output: str, q: Any, k: Any, v: Any, d_o: Any = None, o: Any = None
) -> float:
    """The least atol of `output` (O, dQ, dK, dV): ATOL_FLOOR_FP32_UNITS of fp32's epsilon times
    the size the output has from its inputs: O from V, dV from dO, dQ and dK from the scale, dO,
    V and K or Q (dS = P(dP - D) with dP = dO.V); for dQ and dK, with `o` (O as stored, which the
    backward reads), never below the residue of O's rounding (stored_o_floor)."""
    if output in ("dQ", "dK"):
        size = config.scale * largest(d_o) * largest(v) * largest(k if output == "dQ" else q)
        fp32 = ATOL_FLOOR_FP32_UNITS * 2.0**-23 * size
        return max(fp32, stored_o_floor(config, k if output == "dQ" else q, d_o, o, per_key=output == "dK"))
    elif output in ("O", "dV"):
        size = largest(v if output == "O" else d_o)
    else:  # the softmax's row outputs and dSink: fp32 of their own size
        size = 1.0
    return ATOL_FLOOR_FP32_UNITS * 2.0**-23 * size


def stored_o_floor(config: SdpaConfig, other: Any, d_o: Any, o: Any, per_key: bool = False) -> float:
    """The bound of dQ's (other: K) or dK's (other: Q, `per_key`) error from D = rowsum(dO * O) read
    off O as stored: STORED_O_SIGMAS unit roundoffs of O's dtype times the norm of dO * O that
    carries it, times the scale and max |other| (0 without O: the CPU check, a forward). A row of dQ
    reads one row's D: the largest row norm. A key's dK sums P_ij (dP_ij - D_i) q_i over every query
    row of its group (P_ij <= 1: with one key, P_ij = 1 for all of them), so its rounding errors add
    in quadrature: the largest norm over a batch entry's group of query heads, all its rows."""
    if o is None or d_o is None:
        return 0.0
    import torch

    with torch.no_grad():
        product = d_o.float() * o.float()
        if config.padded:  # the real rows only: what a padded row holds is not O
            lens = torch.tensor([config.lengths(i)[0] for i in range(config.b)], device=o.device)
            product = product * (
                torch.arange(o.shape[2], device=o.device).view(1, 1, -1, 1) < lens.view(-1, 1, 1, 1)
            )
        squares = product.nan_to_num(0.0, 0.0, 0.0).square().sum(-1)  # NaN where a plan wrote nothing
        if per_key:  # (b, h_q, s_q) -> (b, h_kv, the group's rows): query head h reads kv head h // group
            squares = squares.reshape(squares.shape[0], config.h_kv, -1).sum(-1)
        row = float(squares.max().sqrt().item()) if squares.numel() else 0.0
    return STORED_O_SIGMAS * UNIT_ROUNDOFF.get(config.o_dtype, 2.0**-11) * row * config.scale * largest(other)


def largest(t: Any) -> float:
    """max |t| (0 for no tensor), as max(max t, -min t) where torch reduces the dtype: the same
    number without a copy of |t| (a decode batch's V: 0.1 s of a small CPU against 0.67 s)."""
    if t is None or not t.numel():
        return 0.0
    if t.dtype.is_floating_point and t.dtype.itemsize >= 2:
        return max(float(t.amax().item()), -float(t.amin().item()))
    return float(t.abs().max().item())


def compare(out: Any, ref: Any, atol: float, rtol: float, rows: Any = None) -> ErrorMetrics:
    """Error of `out` against `ref` (same logical shape), over the real query rows (`rows`, from
    valid_rows; None: all). Mismatch uses torch.testing's rule: |out - ref| > atol + rtol * |ref|.
    Relative error is over elements with |ref| >= atol, where it means something."""
    import torch

    with torch.no_grad():
        o = out.float()
        if rows is not None:
            selected = rows.expand(o.shape)
            o, ref = o[selected], ref[selected]
        finite = torch.isfinite(o)
        nonfinite = int((~finite).sum().item())
        err = (o - ref).abs()  # a reference that is not finite cannot vouch for anything: a mismatch
        err = torch.where(finite & torch.isfinite(ref), err, torch.full_like(err, float("inf")))
        aref = ref.abs()
        significant = aref >= atol
        rel = torch.where(significant, err / aref.clamp_min(atol), torch.zeros_like(err))
        mismatched = int(((err > atol + rtol * aref) | ~torch.isfinite(ref)).sum().item())
        finite_err = torch.where(finite, err, torch.zeros_like(err))
        return ErrorMetrics(
            max_abs=float(err.max().item()) if err.numel() else 0.0,
            max_rel=float(rel.max().item()) if rel.numel() else 0.0,
            mean_abs=float(finite_err.mean().item()) if err.numel() else 0.0,
            mismatched=mismatched,
            total=int(err.numel()),
            nonfinite=nonfinite,
        )
