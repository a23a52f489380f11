"""The plan of one :func:`tsjit.ops.matmul` call signature: :class:`Plan`.

A call's shapes, strides, dtypes, alignment and options fix the problem, the roles (swap-AB), the
configuration (:mod:`tsjit.ops.configs`), the fused epilogue and the launch geometry; :meth:`Plan.bind`
packs the launch (TMA descriptors, staging copies, the GEMM of :mod:`tsjit.ops.gemm_pingpong`) for one
tuple of data pointers and :meth:`Plan.run` keeps those packed launches.  :mod:`tsjit.ops.matmul` keeps
the caches of plans and the host fast paths.

Module knobs (measurements set them): :data:`OPERAND_L2_PROMOTION`, :data:`REALIGN`.
"""
from __future__ import annotations

import sys
import threading

import tsjit
from tsjit import env
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops import realign as misaligned_rows
from tsjit.ops.device_buffers import LaunchSequence, Workspace, dummy_array
from tsjit.ops.gemm_pingpong import extra_arguments, kernel_for, threads_for
from tsjit.ops.gemm_program import store_box
from tsjit.ops.matmul_checks import check_arguments
from tsjit.ops.operands import Operand, operand_layout, scale_vector, staging_reason
from tsjit.ops.staging import copy_launch, staging_buffer
from tsjit.runtime import driver
from tsjit.runtime.arrays import DeviceArray

BINDINGS_PER_PLAN = 64
#: L2 promotion of the X / Y operand TensorMaps (``tsjit.TensorMap``'s ``l2_promotion``, the driver's
#: ``CU_TENSOR_MAP_L2_PROMOTION_*``).  Measured on the H200 (BENCHMARKS.md, issue 15, 2026-12-01): "128B" is
#: "none" within 0.01x cuBLAS; "256B" costs 0.01 at 2048^3 and 0.08 at 3000 x 5000 x 1000 (rows not 128-byte
#: aligned), so none.
OPERAND_L2_PROMOTION = "none"
#: None: :func:`tsjit.ops.realign.realign_choice` decides which operands with rows 16- but not 128-byte aligned
#: are copied into 128-byte aligned rows first; ``""`` / ``"x"`` / ``"y"`` / ``"both"`` forces it (measurements)
REALIGN = None


WORKSPACE = Workspace()


class Plan:
    """Everything a call's shapes, strides, dtypes, alignment and options fix: the problem, the
    roles, the configuration, the fused epilogue and the launch geometry; plus the packed launches
    of the data-pointer tuples seen so far."""

    def __init__(self, A: Operand, B: Operand, out: Operand | None, bias, residual, activation, alpha, beta,
                 out_dtype, epilogue_fn, batched: bool, sms: int | None = None, scales=("none", "none"),
                 forced=None):
        batch, M, N, K, dtype, axis = check_arguments(A, B, out, bias, residual, activation, beta, out_dtype,
                                                       batched, scales)
        self.batch, self.M, self.N, self.K, self.batched = batch, M, N, K, batched
        self.out_dtype, self.torch = dtype, A.torch
        self.swapped = configs.choose_roles(M, N)
        # X, Y: the operands in D's coordinates, with their K axes (2 for A (., M, K), 1 for B (., K, N))
        x, y = ((B, 1), (A, 2)) if self.swapped else ((A, 2), (B, 1))
        self.x_from_a = not self.swapped
        self.x_layout = operand_layout(*x)
        self.y_layout = operand_layout(*y)
        self.x_staged = self.x_layout is None
        self.y_staged = self.y_layout is None
        self.staging_reasons = [(n, staging_reason(*o)) for n, o, s in (("X", x, self.x_staged),
                                                                        ("Y", y, self.y_staged)) if s]
        x_major = "K" if self.x_staged else self.x_layout[0]
        y_major = "K" if self.y_staged else self.y_layout[0]
        self.P, self.Q = (N, M) if self.swapped else (M, N)
        c_strides = self._d_strides(out.strides) if out is not None else self._d_strides(self._dense(batch, M, N))
        out_ptr_ok = out is None or out.ptr % 16 == 0
        tma_output = (dtype.itemsize == 2 and c_strides[2] == 1 and (c_strides[1] * 2) % 16 == 0 and out_ptr_ok
                      and (batch == 1 or (c_strides[0] * 2) % 16 == 0))
        if axis != "none" and self.swapped:
            axis = "row" if axis == "col" else "col"
        # scale_a scales rows of C, scale_b columns: rows / columns of D unless swapped
        scale_rows, scale_cols = scales[::-1] if self.swapped else scales
        self.fused = FusedEpilogue(alpha=alpha != 1.0, beta=beta != 0.0, bias=axis, activation=activation or "none",
                                   residual=residual is not None, function=epilogue_fn,
                                   transposed=self.swapped and epilogue_fn is not None, scale_rows=scale_rows,
                                   scale_cols=scale_cols)
        sms = driver.device_properties().sm_count if sms is None else sms   # the interpreter: an H200's 132
        self.problem = configs.Problem(self.P, self.Q, K, batch, x_major, y_major, tma_output,
                                       self.fused.loads_per_element, A.dtype.itemsize, dtype.itemsize, sms,
                                       plain_epilogue=self.fused.is_identity)
        self.config, self.ranked = configs.choose(self.problem)
        self.tuning = ""                         # what TSJIT_AUTOTUNE decided, for explain
        if forced is not None:                   # a candidate tuple measured or stored by TSJIT_AUTOTUNE
            self.config = configs.make_config(self.problem, *forced,
                                              estimate_us=configs.estimate(self.problem, *forced) * 1e6)
        self.misaligned = ""                     # why misaligned rows changed the configuration, for explain
        self.realign = self._realign(x[0], y[0], forced is None)
        self.config = cfg = misaligned_rows.realigned_config(self.problem, self.config, self.realign)
        tiles = configs.ceil_div(self.P, cfg.block_m) * configs.ceil_div(self.Q, cfg.block_n) * batch
        self.grid = (min(tiles * cfg.splits, sms),)
        cluster = cfg.cluster_m * cfg.cluster_n
        if cluster > 1:    # whole clusters (tsjit.ops.gemm_cluster): at most one per cluster of tiles
            pairs = (configs.ceil_div(configs.ceil_div(self.P, cfg.block_m), cfg.cluster_m)
                     * configs.ceil_div(configs.ceil_div(self.Q, cfg.block_n), cfg.cluster_n) * batch)
            self.grid = (min(pairs, sms // cluster) * cluster,)
        self.block = (threads_for(cfg),)
        self.workspace_floats = tiles * cfg.splits * cfg.block_m * cfg.block_n
        self.counters = tiles * cfg.block_m // 32
        self.bindings: dict = {}
        self.bindings_built = 0
        self.staging: dict = {}                  # (operand, stream, interpreted) -> padded K-major staging buffer
        self.lock = threading.Lock()

    def _realign(self, x_op: Operand, y_op: Operand, choose_cluster: bool) -> str:
        """Which in-place operands (``"x"``, ``"y"``, ``"both"`` or ``""``) are first copied into rows padded to
        128 bytes (:func:`tsjit.ops.realign.misaligned_choice`, which may also replace the configuration by a
        2-CTA cluster when ``choose_cluster``; :data:`REALIGN` overrides the copies and keeps the configuration)."""
        def misaligned(layout, op):
            if layout is None:
                return False
            _, shape, strides = layout
            return shape[1] > 1 and (strides[1] * op.dtype.itemsize) % misaligned_rows.LINE_BYTES != 0
        mx, my = misaligned(self.x_layout, x_op), misaligned(self.y_layout, y_op)
        self.x_misaligned = mx
        if REALIGN is not None:
            wanted = {"x": (True, False), "y": (False, True), "both": (True, True), "": (False, False)}[REALIGN]
            mx, my = mx and wanted[0], my and wanted[1]
            return "both" if mx and my else "x" if mx else "y" if my else ""
        x_size = x_op.shape[0] * x_op.shape[1] * x_op.shape[2]
        y_size = y_op.shape[0] * y_op.shape[1] * y_op.shape[2]
        if not choose_cluster:
            return misaligned_rows.realign_choice(self.problem, self.config, x_size, y_size, mx, my)
        self.config, copies, self.misaligned = misaligned_rows.misaligned_choice(self.problem, self.config, x_size,
                                                                                 y_size, mx, my)
        return copies

    @staticmethod
    def _dense(batch, M, N):
        return (M * N, N, 1)

    def _d_strides(self, strides):
        """Strides of an (M, N)-shaped array seen in D's coordinates (transposed when swapped)."""
        return (strides[0], strides[2], strides[1]) if self.swapped else tuple(strides)

    def _d_view(self, op: Operand) -> DeviceArray:
        shape = (self.batch, self.P, self.Q)
        strides = self._d_strides(op.strides)
        if not self.batched:
            return op.view(shape[1:], strides[1:])
        return op.view(shape, strides)

    def explain(self) -> str:
        text = configs.explain_choice(self.problem, self.swapped, self.config, self.ranked)
        for name, reason in self.staging_reasons:
            text += (f"\nstaging: {name} cannot be read in place ({reason}): copied into a padded K-major buffer "
                     f"first")
        line = misaligned_rows.LINE_BYTES
        if self.realign:
            which = {"x": "X", "y": "Y", "both": "X and Y"}[self.realign]
            text += (f"\nrealign: {which} copied into rows padded to {line} bytes first (its rows are 16- but not "
                     f"{line}-byte aligned: each TMA box row would span two lines; the estimated gain beats the copy)")
        if self.misaligned:
            text += (f"\nmisaligned rows: {'X and Y' if self.x_misaligned else 'Y'} 16- but not {line}-byte aligned; "
                     f"{self.misaligned}")
        if not self.fused.is_identity:
            text += f"\nepilogue: {self.fused.describe()}"
        if self.tuning:
            text += f"\nautotune: {self.tuning}"
        return text

    def _tensormap(self, op: Operand, k_axis: int, layout, rows_box: int, stream: int, which: str, copies: list,
                   realign: bool = False):
        """The TMA descriptor of operand ``op`` (its K on axis ``k_axis``) in its layout; when
        ``layout`` is None (K-major) or ``realign`` (its own major), of this plan's staging buffer for
        (``which``, ``stream``), rows padded to 128 bytes, and the packed copy into it is appended to
        ``copies``."""
        if layout is None or realign:
            if layout is None:
                other = 3 - k_axis
                major, shape = "K", (op.shape[0], op.shape[other], op.shape[k_axis])
                source = op.view(shape, (op.strides[0], op.strides[other], op.strides[k_axis]))
            else:
                major, shape, strides = layout
                source = op.view(shape, strides)
            where = (which, stream, env.interpret())   # the interpreter's buffers are host memory
            storage = self.staging.get(where)
            if storage is None:
                storage = staging_buffer(op.dtype, *shape, torch_allocator(op.obj) if op.torch else None,
                                         align=misaligned_rows.LINE_BYTES)
                self.staging[where] = storage
            copies.append(copy_launch(source, storage))
            shape, strides, ptr = storage.shape, storage.strides, storage.data_ptr
        else:
            (major, shape, strides), ptr = layout, op.ptr
        box = (rows_box, self.config.block_k) if major == "K" else (64, 64)
        if self.batched:
            array = DeviceArray(shape, op.dtype, strides=strides, data_ptr=ptr)
            box = (1,) + box
        else:
            array = DeviceArray(shape[1:], op.dtype, strides=strides[1:], data_ptr=ptr)
        return tsjit.TensorMap(array, box, swizzle="128B", l2_promotion=OPERAND_L2_PROMOTION)

    def bind(self, A, B, out, bias, residual, alpha, beta, stream: int, scale_a=None, scale_b=None):
        """The packed launches for these operands: the staging copies (if any), then the GEMM."""
        cfg = self.config
        x, y = ((B, 1), (A, 2)) if self.swapped else ((A, 2), (B, 1))
        copies = []
        x_map = self._tensormap(x[0], x[1], self.x_layout, cfg.load_rows, stream, "x", copies,
                                self.realign in ("x", "both"))
        y_map = self._tensormap(y[0], y[1], self.y_layout, cfg.load_columns, stream, "y", copies,
                                self.realign in ("y", "both"))
        c_view = self._d_view(out)
        if cfg.epilogue == "tma":
            box, swizzle = store_box(cfg.staged_columns)
            c_map = tsjit.TensorMap(c_view, ((1,) if self.batched else ()) + (64, box), swizzle=swizzle)
        else:
            c_map = x_map
        rank = 3 if self.batched else 2
        bias_view = dummy_array(1) if bias is None else bias.view((bias.shape[1] * bias.shape[2],),
                                                            (bias.strides[2] if bias.shape[2] > 1 else bias.strides[1],))
        residual_view = dummy_array(rank) if residual is None else self._d_view(residual)
        if cfg.splits > 1:
            workspace, counters = WORKSPACE.get(stream, self.workspace_floats, self.counters)
        else:
            workspace, counters = dummy_array(1), dummy_array(1)
        scale_x, scale_y = (scale_b, scale_a) if self.swapped else (scale_a, scale_b)
        scale_x = dummy_array(1) if scale_x is None else scale_vector(scale_x)
        scale_y = dummy_array(1) if scale_y is None else scale_vector(scale_y)
        arguments = (x_map, y_map, c_view, c_map, bias_view, residual_view, workspace, counters, scale_x, scale_y,
                     self.P, self.Q, self.K,
                     self.batch, float(alpha), float(beta), cfg.block_m, cfg.block_n, cfg.stages,
                     self.problem.x_major, self.problem.y_major, cfg.epilogue, cfg.staged_columns, cfg.splits,
                     self.batched, cfg.group_m, self.fused)
        arguments += extra_arguments(cfg)
        kernel = kernel_for(cfg)
        if env.interpret():   # the CPU interpreter runs plain launches (a packed launch needs the driver)
            launch = kernel[self.grid, self.block]
            gemm = lambda stream: launch(*arguments, stream=stream)  # noqa: E731
        else:
            gemm = kernel.bind(*arguments, grid=self.grid, block=self.block)
        return LaunchSequence(copies + [gemm]) if copies else gemm

    def run(self, A, B, out, bias, residual, alpha, beta, stream: int, scale_a=None, scale_b=None):
        """Launch on ``stream``; returns the packed launch(es), reusable for the same addresses."""
        key = (A.ptr, B.ptr, out.ptr, bias.ptr if bias is not None else 0,
               residual.ptr if residual is not None else 0, alpha, beta, stream,
               scale_a.ptr if scale_a is not None else 0, scale_b.ptr if scale_b is not None else 0)
        bound = self.bindings.get(key)
        if bound is None:
            self.bindings_built += 1
            bound = self.bind(A, B, out, bias, residual, alpha, beta, stream, scale_a, scale_b)
            with self.lock:
                if len(self.bindings) >= BINDINGS_PER_PLAN:
                    self.bindings.pop(next(iter(self.bindings)))
                self.bindings[key] = bound
        bound(stream)
        return bound


def torch_allocator(like):
    """``allocate(nbytes) -> (address, tensor)`` on ``like``'s device through torch's allocator."""
    torch = sys.modules["torch"]

    def allocate(nbytes):
        buffer = torch.empty(nbytes, dtype=torch.uint8, device=like.device)
        return buffer.data_ptr(), buffer
    return allocate
