"""Block-scaled ``tcgen05.mma`` (``kind::mxf8f6f4`` / ``kind::mxf4nvf4`` ``.block_scale``) for the CPU
interpreter: the sub-byte operand formats, the scale-factor formats and the scale matrices in TMEM.

``D = (A * scale_A) x (B * scale_B) (+ D)`` (PTX ISA 9.1 §9.7.16.10.7 "Block Scaling"): row ``m`` of A
(M x K) is cut along K into ``SFA_N`` chunks and chunk ``j`` is multiplied by ``scale_A[m, j]``; row ``n``
of B (N x K, i.e. column ``n`` of the K x N matrix) likewise by ``scale_B[n, j]``.  The number of chunks
per MMA is the scale vector size (PTX ISA §9.7.16.10.7.1): ``scale_vec::1X`` (mxf8f6f4, K = 32, chunks of 32),
``scale_vec::2X`` (mxf4nvf4 with UE8M0, K = 64, chunks of 32), ``scale_vec::4X`` (mxf4nvf4, K = 64,
chunks of 16; the only one UE4M3 scales take, §9.7.16.10.7.1).  ``.block32`` / ``.block16`` are aliases
(``.block32``: 1X for mxf8f6f4, 2X for mxf4nvf4 at K = 64; ``.block16``: 4X).

**What the PTX ISA text states, and is modelled and checked as stated:**

* the element formats (§5.2.3): ``e2m1`` 1 sign, 2 exponent (bias 1), 1 mantissa bit, no infinity or
  NaN (values 0, 0.5, 1, 1.5, 2, 3, 4, 6); ``ue8m0`` 8 exponent bits, value ``2^(code - 127)``, NaN
  0xFF; ``ue4m3`` a 7-bit unsigned E4M3 (bias 7, subnormals), NaN 0x7F, the byte's MSB zero;
  ``e4m3`` / ``e5m2`` as for the dense kinds;
* mxf4nvf4 operands in shared memory: two E2M1 elements per byte, no padding (§9.7.16.10.4.6),
  K-major only (Table 44: no transpose), one MMA reading 64 elements = 32 bytes of each row through
  the usual canonical layouts (§9.7.16.3);
* the instruction descriptor of Tables 43 / 44 (:func:`decode_block_scaled_descriptor`);
* the sub-column of a TMEM word a scale lives in (§9.7.16.10.7.2-3): 1X one byte, selected by the
  SF id (0..3); 2X two bytes (a half word) at byte ``2 x`` (id 0 or 2); 4X the whole word (id 0);
  chunk ``j`` of a row in byte ``id + j`` (byte 0 = bits 0-7);
* "Scale factors for A and B matrices need to be duplicated to all 32 lane partitions of tensor
  memory": :func:`scale_matrix` checks that the four 32-lane quarters hold the same scales and
  raises an :class:`~tsjit.errors.InterpretError` otherwise.

**What the PTX ISA text available here does not state** (it is in Figures 231-233 and 240-242, whose
images are not in the text), so the interpreter takes it from public secondary sources (Colfax Research,
"CUTLASS Tutorial: Hardware-supported Block-Scaling with NVIDIA Blackwell GPUs", and the CUTLASS
``Sm1xxBlockScaledBasicChunk`` layout that the ``tcgen05.cp.32x128b.warpx4`` copy feeds), not checked on a
Blackwell GPU: a scale matrix of ``R`` rows (M = 128 for A, N for B) is a 32-lane tile of ``ceil(R / 32)``
columns, row ``r`` in lane ``r % 32`` and column ``r // 32`` (relative to the scale address), in every
quarter; and the order of the two E2M1 elements of a byte (the element of lower K in the low nibble,
Figure 204's subject; CUTLASS's sub-byte arrays and :func:`tsjit.examples.bw_nvfp4_gemm.quantize_nvfp4`
use it; when A and B are packed alike the order cannot change ``A x B``: it permutes K within a scale chunk).

Not modelled (an :class:`~tsjit.errors.InterpretError` naming it): ``cta_group::2``, A in TMEM, sparse
MMAs, ``K = 96`` (sm_103a only), ``kind::mxf4``, FP6 / FP4 operands of ``kind::mxf8f6f4`` (their padded
shared-memory packing is Figures 202-203 only), a scale address whose lane is not 0.
"""
from __future__ import annotations

import numpy as np

from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.tcgen05 import TMEM_LANES, WARP, TensorMemory, descriptor_addresses, split_address
from tsjit.interpret.wgmma import byte_ranges, gather_elements, operand_values

__all__ = ["E2M1_VALUES", "UE4M3_VALUES", "UE8M0_VALUES", "BlockScaledInstruction", "decode_block_scaled_descriptor",
           "instruction", "vector_size", "unpack_e2m1", "scale_values", "scale_matrix", "operand", "mma",
           "operand_ranges", "SCALE_QUALIFIERS"]

#: E2M1 code (4 bits) -> value (PTX ISA §5.2.3).
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def _ue4m3_table() -> np.ndarray:
    codes = np.arange(128)
    exponent, mantissa = codes >> 3, codes & 7
    values = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    values[0x7F] = np.nan
    return values


#: UE4M3 code (0..127) -> value; 0x7F is NaN (PTX ISA §5.2.3).
UE4M3_VALUES = _ue4m3_table()
#: UE8M0 code -> value ``2^(code - 127)``; 0xFF is NaN (PTX ISA §5.2.3).
UE8M0_VALUES = np.where(np.arange(256) == 255, np.nan, np.ldexp(1.0, np.arange(256) - 127))
#: ``.scale_vec`` / ``.block`` qualifier -> chunks per row of one MMA (``None``: depends on the kind).
SCALE_QUALIFIERS = {"scale_vec::1X": 1, "scale_vec::2X": 2, "scale_vec::4X": 4, "block16": 4, "block32": None}
_KIND_K = {"mxf8f6f4": 32, "mxf4nvf4": 64}
_TYPES = {"mxf8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}, "mxf4nvf4": {1: "e2m1"}}


class BlockScaledInstruction:
    """A decoded, modelled block-scaled MMA: ``kind``, ``m``, ``n``, ``k``, ``a_type``, ``b_type``,
    ``scale_type`` (``"ue8m0"`` / ``"ue4m3"``), ``chunks`` (scales per row), ``sfa_id``, ``sfb_id``,
    ``negate_a``, ``negate_b``."""

    __slots__ = ("kind", "m", "n", "k", "a_type", "b_type", "scale_type", "chunks", "sfa_id", "sfb_id",
                 "negate_a", "negate_b")

    def __init__(self, **fields):
        for name, value in fields.items():
            setattr(self, name, value)


def decode_block_scaled_descriptor(idesc: int) -> dict:
    """The fields of a block-scaled instruction descriptor (PTX ISA 9.1 §9.7.16.4.2, Tables 43 and 44; the
    inverse of :func:`tsjit.lang.umma_descriptors.block_scaled_instruction_descriptor`): ``sparse``,
    ``sfb_id`` (bits 4-5), ``a_type`` (7-9), ``b_type`` (10-12; mxf4nvf4 uses 10-11), ``negate_a/b``,
    ``transpose_a/b``, ``n`` (17-22, ``<< 3``), ``scale_ue8m0`` (bit 23), ``m`` (27-28, ``<< 7``), ``sfa_id``
    (29-30), ``k96`` (bit 31, mxf4nvf4)."""
    idesc = int(idesc) & 0xFFFFFFFF
    return {"sparse": (idesc >> 2) & 1, "sfb_id": (idesc >> 4) & 3, "a_type": (idesc >> 7) & 7,
            "b_type": (idesc >> 10) & 7, "negate_a": (idesc >> 13) & 1, "negate_b": (idesc >> 14) & 1,
            "transpose_a": (idesc >> 15) & 1, "transpose_b": (idesc >> 16) & 1, "n": ((idesc >> 17) & 0x3F) << 3,
            "scale_ue8m0": (idesc >> 23) & 1, "m": ((idesc >> 27) & 3) << 7, "sfa_id": (idesc >> 29) & 3,
            "k96": (idesc >> 31) & 1}


def vector_size(kind: str, qualifier: str) -> int:
    """Scales per row of one MMA for ``.kind::<kind>.block_scale.<qualifier>`` (PTX ISA §9.7.16.10.7.1).

    Raises:
        InterpretError: a qualifier the kind does not take.
    """
    chunks = SCALE_QUALIFIERS.get(qualifier, 0)
    if chunks is None:
        chunks = 1 if kind == "mxf8f6f4" else 2
    legal = {"mxf8f6f4": (1,), "mxf4nvf4": (2, 4)}.get(kind, ())
    if chunks not in legal:
        raise InterpretError(f"tcgen05.mma.kind::{kind}.block_scale.{qualifier}: kind::{kind} takes "
                             f"{' / '.join(f'scale_vec::{c}X' for c in legal) or 'no block scaling here'} "
                             f"(PTX ISA §9.7.16.10.7.1)")
    return chunks


def instruction(idesc: int, kind: str, qualifier: str) -> BlockScaledInstruction:
    """The modelled block-scaled MMA that ``idesc`` describes for ``.kind::<kind>.block_scale.<qualifier>``.

    Raises:
        InterpretError: naming the field: an unmodelled form (module docstring), types or a scale
            type the kind lacks (§9.7.16.4.2, §9.7.16.10.7.1), an SF id the vector size forbids (§9.7.16.10.7.2-3),
            or an illegal M / N (Table 39: M = 128, N a multiple of 8 up to 256 for ``cta_group::1``).
    """
    fields = decode_block_scaled_descriptor(idesc)
    what = f"tcgen05.mma.cta_group::1.kind::{kind}.block_scale.{qualifier} (instruction descriptor " \
           f"0x{int(idesc) & 0xFFFFFFFF:08x})"
    if kind not in _KIND_K:
        raise InterpretError(f"{what}: the interpreter models kind::mxf8f6f4 and kind::mxf4nvf4")
    chunks = vector_size(kind, qualifier)
    if fields["sparse"] or fields["k96"]:
        raise InterpretError(f"{what}: sparse MMAs and K = 96 (sm_103a only) are not modelled")
    b_code = fields["b_type"] & (3 if kind == "mxf4nvf4" else 7)
    a_type, b_type = _TYPES[kind].get(fields["a_type"]), _TYPES[kind].get(b_code)
    if a_type is None or b_type is None:
        raise InterpretError(f"{what}: A type code {fields['a_type']} / B type code {b_code} are not types of "
                             f"kind::{kind} (Tables 43, 44)")
    if kind == "mxf8f6f4" and not {a_type, b_type} <= {"e4m3", "e5m2"}:
        raise InterpretError(f"{what}: {a_type} x {b_type}: FP6 / FP4 operands of kind::mxf8f6f4 are not modelled "
                             f"(their padded shared-memory packing is given only as Figures 202-203 of the PTX "
                             f"ISA); use e4m3 / e5m2, or kind::mxf4nvf4 for FP4")
    if (kind == "mxf4nvf4" and (fields["transpose_a"] or fields["transpose_b"])) or fields["m"] != 128 or \
            not (8 <= fields["n"] <= 256):
        raise InterpretError(f"{what}: M = {fields['m']}, N = {fields['n']}, transpose {fields['transpose_a']}/"
                             f"{fields['transpose_b']}: cta_group::1 block-scaled MMAs have M = 128 and N a "
                             f"multiple of 8 up to 256 (Table 39), FP4 operands K-major (Table 44)")
    scale_type = "ue8m0" if fields["scale_ue8m0"] else "ue4m3"
    if (kind == "mxf8f6f4" and scale_type != "ue8m0") or (scale_type == "ue4m3" and chunks != 4):
        raise InterpretError(f"{what}: {scale_type} scales with scale_vec::{chunks}X: kind::mxf8f6f4 takes UE8M0, "
                             f"UE4M3 takes only scale_vec::4X / block16 (§9.7.16.10.7.1)")
    legal_ids = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[chunks]
    for name in ("sfa_id", "sfb_id"):
        if fields[name] not in legal_ids:
            raise InterpretError(f"{what}: {name} = {fields[name]}; scale_vec::{chunks}X takes {list(legal_ids)} "
                                 f"(PTX ISA §9.7.16.10.7.2-3)")
    return BlockScaledInstruction(kind=kind, m=128, n=fields["n"], k=_KIND_K[kind], a_type=a_type, b_type=b_type,
                                  scale_type=scale_type, chunks=chunks, sfa_id=fields["sfa_id"],
                                  sfb_id=fields["sfb_id"], negate_a=fields["negate_a"], negate_b=fields["negate_b"])


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    """float64 ``(rows, 2 x bytes)`` of E2M1 pairs ``(rows, bytes)`` uint8: element ``2 j`` the low
    nibble of byte ``j``, ``2 j + 1`` the high one (module docstring)."""
    packed = np.asarray(packed, dtype=np.uint8)
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (-1,))
    return E2M1_VALUES[nibbles]


def scale_values(codes: np.ndarray, scale_type: str, what: str) -> np.ndarray:
    """float64 values of scale-factor bytes ``codes`` of ``scale_type`` (``"ue8m0"`` / ``"ue4m3"``).

    Raises:
        InterpretError: a UE4M3 byte with bit 7 set (the format has 7 bits, the byte's MSB zero).
    """
    codes = np.asarray(codes, dtype=np.uint8)
    if scale_type == "ue8m0":
        return UE8M0_VALUES[codes]
    if (codes & 0x80).any():
        bad = int(codes[(codes & 0x80) != 0].flat[0])
        raise InterpretError(f"{what}: UE4M3 scale byte 0x{bad:02x} has bit 7 set; ue4m3 is a 7-bit format whose "
                             f"byte has its MSB zero (PTX ISA §5.2.3)")
    return UE4M3_VALUES[codes]


def scale_matrix(tmem: TensorMemory, address: int, rows: int, chunks: int, sf_id: int, scale_type: str,
                 what: str) -> np.ndarray:
    """float64 ``(rows, chunks)``: the scale matrix an MMA reads at TMEM ``address`` (row ``r`` in lane
    ``r % 32``, column ``r // 32``, bytes ``sf_id ..`` of the word; module docstring).

    Raises:
        InterpretError: a lane other than 0, cells outside an allocation, quarters that do not hold
            the same scales (they must be duplicated to all four), or a bad UE4M3 byte.
    """
    lane, column = split_address(address)
    columns = -(-rows // WARP)
    if lane:
        raise InterpretError(f"{what}: scale address 0x{int(address):08x} is at lane {lane}; the interpreter models "
                             f"scale matrices at lane 0 (duplicated to all four 32-lane quarters)")
    tmem.check(0, column, TMEM_LANES, columns, what)
    data = np.ascontiguousarray(tmem.cells[:, column:column + columns]).view(np.uint8).reshape(TMEM_LANES, columns, 4)[..., sf_id:sf_id + chunks]
    quarters = data.reshape(4, WARP, columns, chunks)
    r = np.arange(rows)
    used = quarters[:, r % WARP, r // WARP]                                  # (4, rows, chunks)
    differs = np.nonzero((used != used[0]).any(axis=(0, 2)))[0]
    if differs.size:
        row = int(differs[0])
        raise InterpretError(f"{what}: the scales of row {row} (lane {row % WARP}, column {column + row // WARP}, "
                             f"bytes {sf_id}..{sf_id + chunks - 1}) differ between the 32-lane quarters "
                             f"({[list(map(int, q)) for q in used[:, row]]}); scale factors must be duplicated to "
                             f"all four lane quarters (PTX ISA §9.7.16.10.7), e.g. copy them with "
                             f"tcgen05.cp.32x128b.warpx4")
    return scale_values(used[0], scale_type, what)


def _addresses(desc: int, rows: int, ptx_type: str, k: int, transposed: int, what: str):
    """(byte addresses, description) of an operand: E2M1 rows of ``k / 2`` bytes (K-major), else one byte per
    element."""
    if ptx_type == "e2m1":
        return descriptor_addresses(desc, rows, k // 2, 1, 0, what)
    return descriptor_addresses(desc, rows, k, 1, transposed, what)


def operand(smem: np.ndarray, desc: int, rows: int, ptx_type: str, k: int, transposed: int, what: str) -> np.ndarray:
    """float64 ``(rows, k)``: an A or B operand of ``ptx_type`` read from shared memory through ``desc``.

    Raises:
        InterpretError: an unmodelled descriptor, or bytes outside shared memory.
    """
    addresses, described = _addresses(desc, rows, ptx_type, k, transposed, what)
    raw = gather_elements(smem, addresses, 1, described)
    return unpack_e2m1(raw) if ptx_type == "e2m1" else operand_values(raw, ptx_type)


def operand_ranges(idesc: int, a_desc: int, b_desc: int, kind: str, qualifier: str) -> list:
    """The shared-memory byte ranges ``[start, end)`` of A and B one block-scaled MMA reads (race checker).

    Raises:
        InterpretError: as :func:`instruction`, or a descriptor the interpreter does not model.
    """
    inst = instruction(idesc, kind, qualifier)
    fields = decode_block_scaled_descriptor(idesc)
    named = f"tcgen05.mma.kind::{kind}.block_scale"
    a = _addresses(a_desc, inst.m, inst.a_type, inst.k, fields["transpose_a"], f"{named} operand A")[0]
    b = _addresses(b_desc, inst.n, inst.b_type, inst.k, fields["transpose_b"], f"{named} operand B")[0]
    return byte_ranges(a) + byte_ranges(b)


def mma(tmem: TensorMemory, smem: np.ndarray, idesc: int, a_desc: int, b_desc: int, d_address: int,
        scale_a: int, scale_b: int, accumulate: bool, *, kind: str, qualifier: str) -> None:
    """One ``tcgen05.mma.cta_group::1.kind::<kind>.block_scale.<qualifier> [d], a_desc, b_desc, idesc,
    [scale_a], [scale_b], enable_input_d`` now: ``D = (A * scale_A) x (B * scale_B)^T (+ D)`` into TMEM
    (D lane ``r`` = row ``r``, column ``c`` = column ``c``, Float32: Layout D, §9.7.16.10.5.4).  Products
    are exact; each row's K products plus D are summed in float64 and rounded once to Float32.

    Raises:
        InterpretError: as :func:`instruction` and :func:`scale_matrix`; operands outside shared
            memory; D outside a TMEM allocation.
    """
    inst = instruction(idesc, kind, qualifier)
    fields = decode_block_scaled_descriptor(idesc)
    named = f"tcgen05.mma.kind::{kind}.block_scale.{qualifier}"
    a = operand(smem, a_desc, inst.m, inst.a_type, inst.k, fields["transpose_a"], f"{named} operand A")
    b = operand(smem, b_desc, inst.n, inst.b_type, inst.k, fields["transpose_b"], f"{named} operand B")
    sfa = scale_matrix(tmem, scale_a, inst.m, inst.chunks, inst.sfa_id, inst.scale_type, f"{named} scale_A")
    sfb = scale_matrix(tmem, scale_b, inst.n, inst.chunks, inst.sfb_id, inst.scale_type, f"{named} scale_B")
    chunk = inst.k // inst.chunks
    lane, column = split_address(d_address)
    tmem.check(lane, column, inst.m, inst.n, f"{named}: D")
    scaled_a = a * np.repeat(sfa, chunk, axis=1)
    scaled_b = b * np.repeat(sfb, chunk, axis=1)
    product = (-1.0) ** (inst.negate_a + inst.negate_b) * (scaled_a @ scaled_b.T)
    cells = tmem.cells[lane:lane + inst.m, column:column + inst.n]
    if accumulate:
        product = product + cells.view(np.float32).astype(np.float64)
    cells[...] = numerics.to_float32(product).view(np.uint32)
