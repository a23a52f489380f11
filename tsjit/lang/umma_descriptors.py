"""The 32-bit instruction descriptor and the 64-bit shared-memory matrix descriptor of
``tcgen05.mma``, and the shapes each MMA kind accepts: pure host arithmetic, no IR.

The device builtins of :mod:`tsjit.lang.tcgen05` encode with these functions; the CPU
interpreter decodes with them (:func:`decode_instruction_descriptor`,
:func:`decode_smem_descriptor`), so both read one definition.

Instruction descriptor (PTX ISA 9.1 §9.7.16.4.2, Table 42; kinds f16, tf32, f8f6f4, i8):

======  ==============================================================================
bits    field
======  ==============================================================================
0-1     sparsity selector (0: dense)
2       sparsity (0 dense, 1 sparse)
3       saturate (i8 only)
4-5     D type: F16 = 0, F32 = 1, S32 = 2
7-9     A type: f16 kind F16 = 0 / BF16 = 1; tf32 kind TF32 = 2; f8f6f4 E4M3 = 0, E5M2 = 1,
        E2M3 = 3, E3M2 = 4, E2M1 = 5; i8 kind U8 = 0, S8 = 1
10-12   B type (same codes)
13, 14  negate A, negate B
15, 16  transpose A, transpose B (0: K-major, 1: MN-major)
17-22   N >> 3
24-28   M >> 4
30-31   maximum shift for B reuse (``.ws`` only)
======  ==============================================================================

Block-scaled kinds (Tables 43, 44): bits 4-5 the B scale-factor id, bit 23 the scale type
(UE8M0 = 1, UE4M3 = 0), bits 27-28 ``M >> 7``, bits 29-30 the A scale-factor id.

Shared-memory descriptor (§9.7.16.4.1): bits 0-13 start address >> 4, 16-29 LBO >> 4,
32-45 SBO >> 4, 46-48 the fixed value 0b001, 49-51 base offset, 52 LBO mode, 61-63 swizzle
(0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B).  The field meanings of LBO / SBO are
those of the canonical layouts (§9.7.16.3.3), the same as wgmma's: K-major swizzled LBO is
"assumed 1" (16 bytes), SBO the distance of 8-row groups (``8 x span``).

Shapes (Table 39, ``tcgen05.mma`` without ``.ws``, dense): M in {64, 128} for
``cta_group::1`` and {128, 256} for ``cta_group::2`` (the pair's M); N a multiple of 8 in
8..256 (``cta_group::1``) or of 16 in 16..256 (``::2``), for i8 8, 16, 24, 32 then steps of
16 (``::1``) or multiples of 32 (``::2``); K = 32 bytes of A per row: 16 (f16), 8 (tf32),
32 (f8f6f4, i8).  ``.ws``: M in {32, 64, 128}, N in {64, 128, 256}, ``cta_group::1`` only.
Block-scaled: M = 128 (``::1``) or {128, 256} (``::2``), K 32 (mxf8f6f4) or 64 (mxf4nvf4).
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.errors import CompilationError

__all__ = ["KINDS", "BLOCK_SCALED_KINDS", "KIND_K", "TYPE_CODES", "D_TYPE_CODES", "SWIZZLE_CODES",
           "InstructionShape", "check_shape", "instruction_descriptor", "block_scaled_instruction_descriptor",
           "decode_instruction_descriptor", "smem_descriptor_bits", "decode_smem_descriptor"]

#: dense kinds; the PTX ``.kind`` is ``kind::<name>``; the LLVM intrinsic's ``kind`` immediate.
KINDS = {"f16": 0, "tf32": 1, "f8f6f4": 2, "i8": 3}
BLOCK_SCALED_KINDS = ("mxf8f6f4", "mxf4nvf4")
#: K of one MMA per kind (32 bytes of A per row; the block-scaled FP4 kind reads 64 elements).
KIND_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32, "mxf8f6f4": 32, "mxf4nvf4": 64}
#: A/B type codes per kind (bits 7-9 / 10-12).
TYPE_CODES = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "i8": {"u8": 0, "s8": 1},
    "mxf8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "mxf4nvf4": {"e2m1": 1},
}
#: D type codes per kind (bits 4-5).
D_TYPE_CODES = {"f16": {"f16": 0, "f32": 1}, "tf32": {"f32": 1}, "f8f6f4": {"f16": 0, "f32": 1},
                "i8": {"s32": 2}}
#: swizzle name -> the 3-bit mode of bits 61-63 and the span (bytes of one pattern row).
SWIZZLE_CODES = {"none": (0, 0), "128B_base32B": (1, 128), "128B": (2, 128), "64B": (4, 64), "32B": (6, 32)}
_FIELD = 1 << 14


@dataclass(frozen=True)
class InstructionShape:
    """A checked MMA shape: ``m`` (the whole MMA: the pair's rows for ``cta_group=2``), ``n``, ``k``."""

    kind: str
    m: int
    n: int
    k: int
    cta_group: int
    weight_stationary: bool = False

    @property
    def rows_per_cta(self) -> int:
        """Accumulator rows (TMEM lanes) in each CTA: M, or M / 2 for a pair."""
        return self.m // self.cta_group


def _legal_n(kind: str, cta_group: int, ws: bool) -> tuple[int, ...]:
    if ws:
        return (64, 128, 256)
    if kind == "i8":
        if cta_group == 2:
            return tuple(range(32, 257, 32))
        return (8, 16, 24, *range(32, 257, 16))
    step = 16 if cta_group == 2 else 8
    return tuple(range(step, 257, step))


def _legal_m(kind: str, cta_group: int, ws: bool) -> tuple[int, ...]:
    if ws:
        return (32, 64, 128)
    if kind in BLOCK_SCALED_KINDS:
        return (128,) if cta_group == 1 else (128, 256)
    return (64, 128) if cta_group == 1 else (128, 256)


def check_shape(kind: str, m, n, k=None, *, cta_group: int = 1, weight_stationary: bool = False,
                what: str = "tsjit.tcgen05.mma") -> InstructionShape:
    """Validate an MMA shape against PTX ISA §9.7.16.2.1, Table 39 (dense MMAs).

    Args:
        kind: ``"f16"``, ``"tf32"``, ``"f8f6f4"``, ``"i8"``, ``"mxf8f6f4"`` or ``"mxf4nvf4"``.
        m: M of the MMA (for ``cta_group=2`` the pair's M: 128 or 256).
        n: N.
        k: K (default: the kind's only K).
        cta_group: 1 or 2.
        weight_stationary: the ``.ws`` variant (``cta_group::1`` only).
        what: the builtin named in messages.

    Raises:
        CompilationError: naming the operand (``kind``, ``cta_group``, ``m``, ``n`` or ``k``) that is
            illegal and listing the legal values.
    """
    if kind not in KIND_K:
        raise CompilationError(f"{what}: kind must be one of {list(KIND_K)}, got {kind!r}")
    if cta_group not in (1, 2) or isinstance(cta_group, bool):
        raise CompilationError(f"{what}: cta_group must be 1 or 2, got {cta_group!r}")
    if weight_stationary and (cta_group != 1 or kind in BLOCK_SCALED_KINDS):
        raise CompilationError(f"{what}: the .ws (weight-stationary) MMA exists only for cta_group=1 and the "
                               f"kinds f16, tf32, f8f6f4, i8 (PTX ISA §9.7.16.10.9.3); got cta_group={cta_group}, "
                               f"kind={kind!r}")
    legal_m = _legal_m(kind, cta_group, weight_stationary)
    if isinstance(m, bool) or m not in legal_m:
        pair = " (the pair's M: each CTA holds M / 2 rows)" if cta_group == 2 else ""
        raise CompilationError(f"{what}: operand m (M of D and A) must be one of {list(legal_m)} for kind::{kind} "
                               f"cta_group::{cta_group}{' .ws' if weight_stationary else ''}{pair}, got m={m!r}")
    legal_n = _legal_n(kind, cta_group, weight_stationary)
    if isinstance(n, bool) or n not in legal_n:
        if weight_stationary:
            rule = "64, 128 or 256"
        elif kind == "i8":
            rule = "8, 16, 24, 32, 48, ... 256 (steps of 16 above 32)" if cta_group == 1 else "a multiple of 32 up to 256"
        else:
            rule = f"a multiple of {legal_n[0]} from {legal_n[0]} to 256"
        raise CompilationError(f"{what}: operand n (N of D and B) must be {rule} for kind::{kind} "
                               f"cta_group::{cta_group}, got n={n!r}")
    kk = KIND_K[kind]
    if k is not None and k != kk:
        raise CompilationError(f"{what}: operand k must be {kk} for kind::{kind} (one MMA reads 32 bytes of K per "
                               f"row), got k={k!r}; issue K / {kk} MMAs and advance the descriptors")
    return InstructionShape(kind, m, n, kk, cta_group, weight_stationary)


def _type_code(kind: str, name: str, operand: str, what: str) -> int:
    codes = TYPE_CODES[kind]
    if name not in codes:
        raise CompilationError(f"{what}: {operand} must be one of {list(codes)} for kind::{kind}, got {name!r}")
    return codes[name]


def instruction_descriptor(shape: InstructionShape, a_type: str, b_type: str, d_type: str, *,
                           transpose_a: int = 0, transpose_b: int = 0, negate_a: int = 0, negate_b: int = 0,
                           saturate: int = 0, max_shift: int = 0, what: str = "tsjit.tcgen05.mma") -> int:
    """The 32-bit instruction descriptor of a dense MMA (PTX ISA §9.7.16.4.2, Table 42).

    Args:
        shape: from :func:`check_shape`.
        a_type, b_type: PTX element types (``"bf16"``, ``"f16"``, ``"tf32"``, ``"e4m3"``, ...,
            ``"s8"``/``"u8"``); f16 and tf32 kinds need ``a_type == b_type``.
        d_type: ``"f32"``, ``"f16"`` or ``"s32"`` (i8).
        transpose_a, transpose_b: 1 for an MN-major operand.
        negate_a, negate_b: 1 negates (not for i8).
        saturate: i8 only.
        max_shift: 0..3, ``.ws`` only.

    Raises:
        CompilationError: a type the kind lacks, naming the operand.
    """
    kind = shape.kind
    if kind not in KINDS:
        raise CompilationError(f"{what}: kind::{kind} is block-scaled; use block_scaled_instruction_descriptor")
    a = _type_code(kind, a_type, "a_dtype", what)
    b = _type_code(kind, b_type, "b_dtype", what)
    if kind in ("f16", "tf32") and a_type != b_type:
        raise CompilationError(f"{what}: kind::{kind} multiplies equal types; a_dtype is {a_type}, b_dtype {b_type}")
    d_codes = D_TYPE_CODES[kind]
    if d_type not in d_codes:
        raise CompilationError(f"{what}: d_dtype (the accumulator) must be one of {list(d_codes)} for kind::{kind}, "
                               f"got {d_type!r}")
    if kind == "i8" and (negate_a or negate_b):
        raise CompilationError(f"{what}: kind::i8 cannot negate A or B")
    if kind != "i8" and saturate:
        raise CompilationError(f"{what}: saturate applies to kind::i8 only")
    if max_shift and not shape.weight_stationary:
        raise CompilationError(f"{what}: max_shift applies to the .ws MMA only")
    for name, value in (("transpose_a", transpose_a), ("transpose_b", transpose_b), ("negate_a", negate_a),
                        ("negate_b", negate_b), ("saturate", saturate)):
        if value not in (0, 1):
            raise CompilationError(f"{what}: {name} must be 0 or 1, got {value!r}")
    if max_shift not in (0, 1, 2, 3):
        raise CompilationError(f"{what}: max_shift must be 0..3, got {max_shift!r}")
    return (saturate << 3) | (d_codes[d_type] << 4) | (a << 7) | (b << 10) | (negate_a << 13) | \
        (negate_b << 14) | (transpose_a << 15) | (transpose_b << 16) | ((shape.n >> 3) << 17) | \
        ((shape.m >> 4) << 24) | (max_shift << 30)


def block_scaled_instruction_descriptor(shape: InstructionShape, a_type: str, b_type: str, *, scale_type: str,
                                        scale_a_id: int = 0, scale_b_id: int = 0, transpose_a: int = 0,
                                        transpose_b: int = 0, what: str = "tsjit.tcgen05.mma_block_scaled") -> int:
    """The instruction descriptor of a block-scaled MMA (PTX ISA §9.7.16.4.2, Tables 43 and 44).

    Args:
        shape: from :func:`check_shape` with kind ``"mxf8f6f4"`` or ``"mxf4nvf4"``.
        a_type, b_type: element types (``"e2m1"`` for mxf4nvf4).
        scale_type: ``"ue8m0"`` (both kinds) or ``"ue4m3"`` (mxf4nvf4, NVFP4).
        scale_a_id, scale_b_id: scale-factor data ids (0..3; 0 or 2 for mxf4nvf4).
        transpose_a, transpose_b: MN-major operands (mxf8f6f4 only).

    Raises:
        CompilationError: an operand outside the tables, naming it.
    """
    kind = shape.kind
    if kind not in BLOCK_SCALED_KINDS:
        raise CompilationError(f"{what}: kind must be one of {list(BLOCK_SCALED_KINDS)}, got {kind!r}")
    a = _type_code(kind, a_type, "a_dtype", what)
    b = _type_code(kind, b_type, "b_dtype", what)
    scales = {"ue8m0": 1, "ue4m3": 0} if kind == "mxf4nvf4" else {"ue8m0": 1}
    if scale_type not in scales:
        raise CompilationError(f"{what}: scale_type must be one of {list(scales)} for kind::{kind}, got {scale_type!r}")
    ids = (0, 2) if kind == "mxf4nvf4" else (0, 1, 2, 3)
    for name, value in (("scale_a_id", scale_a_id), ("scale_b_id", scale_b_id)):
        if value not in ids:
            raise CompilationError(f"{what}: {name} must be one of {list(ids)} for kind::{kind}, got {value!r}")
    if kind == "mxf4nvf4" and (transpose_a or transpose_b):
        raise CompilationError(f"{what}: kind::mxf4nvf4 operands must be K-major (transpose_a = transpose_b = 0)")
    return (scale_b_id << 4) | (a << 7) | (b << 10) | (transpose_a << 15) | (transpose_b << 16) | \
        ((shape.n >> 3) << 17) | (scales[scale_type] << 23) | ((shape.m >> 7) << 27) | (scale_a_id << 29)


def decode_instruction_descriptor(idesc: int) -> dict:
    """The fields of a dense-kind instruction descriptor (the inverse of
    :func:`instruction_descriptor`): ``d_type, a_type, b_type`` codes, ``negate_a/b``,
    ``transpose_a/b``, ``n``, ``m``, ``sparse``, ``saturate``, ``max_shift``."""
    return {"sparse": (idesc >> 2) & 1, "saturate": (idesc >> 3) & 1, "d_type": (idesc >> 4) & 3,
            "a_type": (idesc >> 7) & 7, "b_type": (idesc >> 10) & 7, "negate_a": (idesc >> 13) & 1,
            "negate_b": (idesc >> 14) & 1, "transpose_a": (idesc >> 15) & 1, "transpose_b": (idesc >> 16) & 1,
            "n": ((idesc >> 17) & 0x3F) << 3, "m": ((idesc >> 24) & 0x1F) << 4, "max_shift": (idesc >> 30) & 3}


def smem_descriptor_bits(*, leading_byte_offset: int, stride_byte_offset: int, swizzle: str,
                         base_offset: int = 0, lbo_absolute: bool = False) -> int:
    """Bits 14-63 of a tcgen05 shared-memory descriptor (everything but the start address;
    PTX ISA §9.7.16.4.1), with the fixed value 0b001 in bits 46-48.

    Raises:
        CompilationError: LBO / SBO not a multiple of 16 below 2**18, base_offset outside 0..7, or an
            unknown swizzle.
    """
    if swizzle not in SWIZZLE_CODES:
        raise CompilationError(f"tcgen05 descriptor swizzle must be one of {list(SWIZZLE_CODES)}, got {swizzle!r}")
    fields = {}
    for name, value in (("leading_byte_offset", leading_byte_offset), ("stride_byte_offset", stride_byte_offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value % 16 or value >> 4 >= _FIELD:
            raise CompilationError(f"tcgen05 descriptor {name} must be a compile-time multiple of 16 bytes below "
                                   f"{_FIELD * 16}, got {value!r}")
        fields[name] = value >> 4
    if isinstance(base_offset, bool) or not isinstance(base_offset, int) or not 0 <= base_offset < 8:
        raise CompilationError(f"tcgen05 descriptor base_offset must be in 0..7, got {base_offset!r}")
    return (SWIZZLE_CODES[swizzle][0] << 61) | (int(bool(lbo_absolute)) << 52) | (base_offset << 49) | \
        (1 << 46) | (fields["stride_byte_offset"] << 32) | (fields["leading_byte_offset"] << 16)


def decode_smem_descriptor(desc: int) -> dict:
    """The fields of a tcgen05 shared-memory descriptor: ``address`` (bytes in the shared window),
    ``leading_byte_offset``, ``stride_byte_offset`` (bytes), ``version`` (bits 46-48, 1),
    ``base_offset``, ``lbo_absolute``, ``swizzle`` (name, or the raw code when unknown)."""
    code = (desc >> 61) & 7
    names = {c: name for name, (c, _) in SWIZZLE_CODES.items()}
    return {"address": (desc & 0x3FFF) << 4, "leading_byte_offset": ((desc >> 16) & 0x3FFF) << 4,
            "stride_byte_offset": ((desc >> 32) & 0x3FFF) << 4, "version": (desc >> 46) & 7,
            "base_offset": (desc >> 49) & 7, "lbo_absolute": (desc >> 52) & 1, "swizzle": names.get(code, code)}
