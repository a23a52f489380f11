"""A CPU interpreter for tsjit kernels, warp-specialized ones included (issue 13).

``TSJIT_INTERPRET=1``, ``kernel.interpret[grid, block](...)`` or ``tsjit.compile(..., interpret=True)``
run a kernel on the CPU: threads, barriers, mbarriers, TMA and wgmma with the hardware's semantics,
numpy / tsjit / torch-CPU arrays as arguments, and detectors for what a GPU does not tell you
(deadlocks, out-of-bounds accesses, races, uninitialized shared memory).

**Design: interpret the LLVM IR tsjit emits, not the Python source.**  The kernel goes through the
compiler's own frontend and TS lowering (:mod:`.program`), and the interpreter executes the resulting
``llvmlite.ir`` function.  So const_expr arms, range_constexpr unrolling, label folding and the
TaskManager's verification are *the compiler's*, identical to compiling; and the pipeline semantics
cannot drift from the lowering: the barriers, arrival counts, expect_tx byte counts and parities
the interpreter executes are exactly those the protocol table made the lowering emit.  A second
interpreter of the Python source would be a second implementation of every builtin and of the TS
lowering, free to disagree with the real one.  The price is that messages speak of instructions;
every instruction carries the source line of the statement that emitted it, and the TS lowering's
step comments name the task and step.

Execution (:mod:`.translate`, :mod:`.machine`): each instruction is translated once into a Python
closure over register slots; each GPU thread is a generator-based fiber that runs until an
instruction must wait (barrier, collective, mbarrier phase) and yields what it waits on.  Warp
collectives are rendezvous of their lanes.  CTAs of a cluster run together, clusters one after
another.  When no thread can run, the interpreter reports the deadlock.

Modules: :mod:`.program` (lowering with notes), :mod:`.translate` / :mod:`.casts` /
:mod:`.memory_ops` (instructions), :mod:`.scalars` (exact dtype semantics), :mod:`.memory`
(address spaces), :mod:`.machine` (fibers, scheduler), :mod:`.sync` / :mod:`.sync_ops` (barriers),
:mod:`.intrinsics` (special registers, math, warp collectives), :mod:`.async_ops` (TMA, bulk copies,
cp.async), :mod:`.tensor_ops` (ldmatrix, stmatrix), :mod:`.wgmma_ops`
(asynchronous wgmma: executed when its wait needs it; :mod:`.liveness` tells which registers it retires), :mod:`.clc` (cluster launch control
against the machine's launch queue), :mod:`.races` (race / uninit checks),
:mod:`.report` (deadlock reports), :mod:`.pdl` (griddepcontrol: a dependent grid's accesses to its
primary's data before ``griddepcontrol.wait``), :mod:`.launch` (entry points).  The tensor-side modules
(:mod:`.tma`, :mod:`.swizzle`, :mod:`.wgmma`, :mod:`.matrix`, :mod:`.numerics`) are pure numpy
functions behind the contract in ``INTERFACE.md``.
"""
