"""ldmatrix / stmatrix of the CPU interpreter (tsjit.interpret.matrix) against the PTX ISA's
per-lane definition, written out element by element here."""
import numpy as np
import pytest

from tsjit.errors import InterpretError
from tsjit.interpret.matrix import ldmatrix, stmatrix


def row_addresses(rng, num):
    """Distinct, 16-byte aligned, scattered row addresses for the 8 * num used lanes (others junk)."""
    rows = rng.permutation(256)[:32] * 16
    rows[8 * num:] = 7                          # unused lanes: not even aligned
    return rows


def reference_register(smem, addresses, lane, matrix, trans):
    """Register ``matrix`` of ``lane``, from the PTX ISA's description."""
    def element(row, col):
        address = addresses[8 * matrix + row] + 2 * col
        return int(smem[address]) | int(smem[address + 1]) << 8
    if trans:
        low, high = element(2 * (lane % 4), lane // 4), element(2 * (lane % 4) + 1, lane // 4)
    else:
        low, high = element(lane // 4, 2 * (lane % 4)), element(lane // 4, 2 * (lane % 4) + 1)
    return low | high << 16


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_gives_each_lane_the_isa_elements(num, trans):
    rng = np.random.default_rng()
    smem = rng.integers(0, 256, 4096, dtype=np.uint8)
    addresses = row_addresses(rng, num)
    got = ldmatrix(smem, addresses, num, trans)
    assert got.shape == (32, num) and got.dtype == np.uint32
    for lane in range(32):
        for matrix in range(num):
            assert got[lane, matrix] == reference_register(smem, addresses, lane, matrix, trans)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_writes_what_ldmatrix_reads_and_nothing_else(num, trans):
    rng = np.random.default_rng()
    smem = np.full(4096, 0xAB, np.uint8)
    addresses = row_addresses(rng, num)
    values = rng.integers(0, 2 ** 32, (32, num), dtype=np.uint64).astype(np.uint32)
    stmatrix(smem, addresses, values, num, trans)
    np.testing.assert_array_equal(ldmatrix(smem, addresses, num, trans), values)
    touched = np.zeros(4096, bool)
    for address in addresses[:8 * num]:
        touched[address:address + 16] = True
    assert (smem[~touched] == 0xAB).all()


def test_trans_transposes_each_matrix():
    smem = np.zeros(256, np.uint8)
    smem[:128] = np.arange(64, dtype=np.uint16).view(np.uint8)      # matrix[r][c] = 8r + c, rows 16 B apart
    addresses = np.array([16 * r for r in range(8)] * 4)
    plain, transposed = ldmatrix(smem, addresses, 1, False), ldmatrix(smem, addresses, 1, True)
    assert plain[5, 0] == (8 * 1 + 2) | (8 * 1 + 3) << 16           # lane 5: row 1, columns 2, 3
    assert transposed[5, 0] == (8 * 2 + 1) | (8 * 3 + 1) << 16      # lane 5: column 1, rows 2, 3


@pytest.mark.parametrize("address,fragment", [(8, "not 16-byte aligned"), (4096, "outside")])
def test_bad_row_addresses_name_the_lane(address, fragment):
    addresses = np.arange(32) * 16
    addresses[3] = address
    with pytest.raises(InterpretError, match=f"lane 3 .*{fragment}"):
        ldmatrix(np.zeros(4096, np.uint8), addresses, 1, False)
    with pytest.raises(InterpretError, match="x3 does not exist"):
        stmatrix(np.zeros(4096, np.uint8), np.arange(32) * 16, np.zeros((32, 3)), 3, False)
