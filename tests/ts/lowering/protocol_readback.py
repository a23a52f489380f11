"""Read the barrier operations back out of emitted LLVM IR, and out of the interleaving model.

:func:`ir_barrier_events` runs a tiny interpreter over the kernel's (unoptimised) LLVM IR text
for every thread of one CTA (cluster rank 0): integer arithmetic, phis, selects, branches,
shared-memory address arithmetic and the NVVM intrinsics the pipelines use.  Each thread's run
records its barrier operations:

* ``wait``  -- ``mbarrier.try_wait.parity`` in a block that branches back to itself (a blocking
  parity-wait loop), with the barrier and the parity;
* ``probe`` -- any other ``try_wait.parity`` (its result is the ``probe_result`` argument);
* ``arrive`` / ``arm`` -- ``mbarrier.arrive`` (local, or ``mapa`` + cluster arrive on a peer
  CTA), ``cp.async.mbarrier.arrive.noinc``, ``tcgen05.commit`` (one arrival, one per CTA of a
  multicast mask), ``mbarrier.arrive.expect_tx`` with its bytes (local, or ``mapa`` + cluster arm
  of a peer CTA's barrier); a cluster one records the rank it lands on.

:func:`canonical` folds the per-thread runs of one task into the sequence the interleaving model
speaks: waits and probes (which every thread of the task must execute identically), separated by
the total arrivals and bytes per barrier that land between them (summed over the threads, and
over the CTAs a remote arrival reaches: the model's symmetric one-CTA view of a cluster).
:func:`model_events` produces the same sequence from a compiled model process.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from tsjit import ts

_LINE = re.compile(r'^\s+(?:(%"[^"]+") = )?(.*)$')
_NAME = re.compile(r'(%"[^"]+"|@"[^"]+")')
_TYPE = re.compile(r'\bi\d+\b|addrspace\(\d+\)|\[\d+ x [^\]]+\]|\{[^}]*\}|\balign \d+')
_LITERAL = re.compile(r'(?<![\w.])-?\d+\b|\btrue\b|\bfalse\b')


class IRFunction:
    """The blocks of the kernel function: ``{label: [(result, text), ...]}`` and the entry label."""

    def __init__(self, llir: str):
        body = llir[llir.index("define ptx_kernel"):]
        self.params = _NAME.findall(body[:body.index("{")])[1:]       # the kernel's parameters
        body = body[body.index("{") + 1:body.index("\n}")]
        self.blocks: dict = {}
        self.order: list = []
        label = None
        for line in body.splitlines():
            if not line.strip():
                continue
            if not line.startswith(" "):
                label = line.rstrip(":").strip('"')
                self.blocks[label] = []
                self.order.append(label)
                continue
            m = _LINE.match(line)
            self.blocks[label].append((m.group(1), m.group(2)))
        self.entry = self.order[0]

    def loops_on_itself(self, label: str) -> bool:
        term = self.blocks[label][-1][1]
        return term.startswith("br i1") and f'label %"{label}"' in term


def _ops(text: str) -> list:
    """The operands of an instruction: value names and literals, types left out."""
    out = []
    for part in _NAME.split(text):
        if part.startswith('%"'):
            out.append(part)
        elif not part.startswith('@"'):
            out += _LITERAL.findall(_TYPE.sub(" ", part))
    return out


class _Thread:
    """One thread's run (see the module docstring)."""

    def __init__(self, fn: IRFunction, tid: int, block_dim: int, probe_result: bool, cta_rank: int = 0,
                 params: dict | None = None, grid_x: int = 1):
        self.fn, self.tid, self.block_dim, self.probe_result = fn, tid, block_dim, probe_result
        self.cta_rank, self.grid_x = cta_rank, grid_x
        self.values: dict = {name: 0 for name in fn.params}       # unbound parameters (pointers, maps) read 0
        self.values.update({f'%"{name}"': value for name, value in (params or {}).items()})
        self.events: list = []

    def value(self, token: str):
        if token.startswith("%"):
            return self.values[token]
        if token in ("true", "false"):
            return token == "true"
        return int(token)

    def run(self, limit: int = 200_000) -> list:
        label, previous, steps = self.fn.entry, None, 0
        while True:
            nxt = None
            for result, text in self.fn.blocks[label]:
                steps += 1
                if steps > limit:
                    raise AssertionError(f"thread {self.tid}: IR run did not finish")
                if text.startswith("ret"):
                    return self.events
                if text.startswith("br "):
                    nxt = self._branch(text)
                    break
                out = self._instruction(label, previous, text)
                if result is not None:
                    self.values[result] = out
            previous, label = label, nxt

    def _branch(self, text: str) -> str:
        labels = re.findall(r'label %"([^"]+)"', text)
        if text.startswith("br i1"):
            cond = self.value(_ops(text)[0])
            return labels[0] if cond else labels[1]
        return labels[0]

    def _instruction(self, label, previous, text):
        op = text.split()[0]
        tokens = _ops(text)
        if op == "phi":
            for value, source in re.findall(r'\[([^,]+), %"([^"]+)"\]', text):
                if source == previous:
                    return self.value(value.strip())
            raise AssertionError(f"phi without an edge from {previous}: {text}")
        if op == "call":
            return self._call(label, text)
        if op == "getelementptr":
            return self._gep(text)
        if op in ("zext", "sext", "trunc", "bitcast", "addrspacecast", "ptrtoint", "inttoptr"):
            value = self.value(tokens[0])
            return int(value) if isinstance(value, bool) else value
        if op == "icmp":
            return self._icmp(text.split()[1], self.value(tokens[0]), self.value(tokens[1]))
        if op == "select":
            c, a, b = (self.value(t) for t in tokens[:3])
            return a if c else b
        if op == "extractvalue":
            return self.value(tokens[0])[int(tokens[-1])]
        if op in ("load",):
            return 0
        if op in ("store", "fence"):
            return None
        a, b = (self.value(t) for t in tokens[:2])
        a, b = int(a), int(b)
        return {"add": a + b, "sub": a - b, "mul": a * b, "and": a & b, "or": a | b, "xor": a ^ b,
                "shl": a << b, "ashr": a >> b, "lshr": a >> b, "sdiv": int(a / b) if b else 0,
                "udiv": a // b if b else 0, "srem": a % b if b else 0,
                "urem": a % b if b else 0}[op]

    @staticmethod
    def _icmp(pred, a, b) -> bool:
        return {"eq": a == b, "ne": a != b, "sge": a >= b, "sgt": a > b, "sle": a <= b,
                "slt": a < b, "uge": a >= b, "ugt": a > b, "ule": a <= b, "ult": a < b}[pred]

    def _gep(self, text):
        tokens = _ops(text)
        if "@\"tsjit_smem\"" in text:
            return ("smem", self.value(tokens[-1]))
        base = self.values.get(tokens[0])
        if isinstance(base, tuple) and base[0] == "smem":
            scale = 8 if text.startswith("getelementptr inbounds i64") else 1
            return ("smem", base[1] + scale * int(self.value(tokens[1])))
        return ("global", 0)

    def _call(self, label, text):
        callee = re.search(r'@"([^"]+)"', text)
        if callee is None:        # inline asm: the lowering's PTX comments, no barrier effect
            return None
        name = callee.group(1)
        args = [self.value(t) for t in _ops(text.split(name, 1)[1][1:])]
        sreg = {"tid.x": self.tid, "tid.y": 0, "tid.z": 0, "ntid.x": self.block_dim, "ntid.y": 1,
                "ntid.z": 1, "laneid": self.tid % 32, "cluster.ctarank": self.cta_rank,
                "nctaid.x": self.grid_x, "nctaid.y": 1, "nctaid.z": 1,
                "ctaid.x": self.cta_rank if self.grid_x > 1 else 0}
        if name.startswith("llvm.nvvm.read.ptx.sreg."):
            return sreg.get(name[len("llvm.nvvm.read.ptx.sreg."):], 0)
        if name == "llvm.nvvm.shfl.sync.idx.i32":
            return args[1]                    # warp-uniform operands in these programs
        if name == "llvm.nvvm.elect.sync":
            return (0, self.tid % 32 == 0)
        if name == "llvm.nvvm.mapa.shared.cluster":
            return ("remote", args[0][1], args[1])
        if name.startswith("llvm.nvvm.mbarrier.try.wait.parity"):
            kind = "wait" if self.fn.loops_on_itself(label) else "probe"
            self.events.append((kind, args[0][1], int(args[1]), label, 0))
            return True if kind == "wait" else self.probe_result
        if name == "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta":
            self.events.append(("arm", args[0][1], 1, args[1], label))
        elif name == "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cluster.space.cluster":
            self.events.append(("arm", args[0][1], 1, args[1], label, args[0][2]))
        elif name == "llvm.nvvm.mbarrier.arrive.scope.cta.space.cta":
            self.events.append(("arrive", args[0][1], args[1], 0, label))
        elif name in ("llvm.nvvm.mbarrier.arrive.scope.cluster.space.cluster",
                      "llvm.nvvm.mbarrier.arrive.relaxed.scope.cluster.space.cluster"):     # a consumer release
            target = args[0][2] if args[0][0] == "remote" else self.cta_rank
            self.events.append(("arrive", args[0][1], args[1], 0, label, target))
        elif name == "llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared":
            self.events.append(("arrive", args[0][1], 1, 0, label))
        elif name.startswith("llvm.nvvm.tcgen05.commit.shared."):
            self.events.append(("arrive", args[0][1], 1, 0, label))       # one arrival when the MMAs finish
        elif name.startswith("llvm.nvvm.tcgen05.commit.mc.shared."):
            self.events.append(("arrive", args[0][1], bin(args[1]).count("1"), 0, label))  # one per masked CTA
        elif name == "llvm.nvvm.mbarrier.init.shared":
            self.events.append(("init", args[0][1], args[1], 0, label))
        return 0


def ir_barrier_events(llir: str, block_dim: int, probe_result: bool = False, cta_rank: int = 0,
                      params: dict | None = None, grid_x: int = 1) -> dict:
    """``{thread id: [event, ...]}`` for every thread of the CTA of cluster rank ``cta_rank`` (see the
    module docstring; a grid of one CTA per cluster position, or with ``grid_x`` > 1 a grid of one
    cluster of ``grid_x`` CTAs: ``blockIdx.x`` is the rank); ``params`` binds scalar kernel
    parameters by name.  A cluster arrive records the rank it lands on as the event's sixth element."""
    fn = IRFunction(llir)
    return {tid: _Thread(fn, tid, block_dim, probe_result, cta_rank, params, grid_x).run()
            for tid in range(block_dim)}


def barrier_names(events: dict, stages: int, rings: tuple = ("",)) -> dict:
    """``{smem address: "full[i]" / "empty[i]"}`` from the init events: one ring's 2 x S barriers,
    full[0..S) then empty[0..S) (inventory §3).  ``rings``: the name prefixes of several rings of ``stages``
    stages each, in address order (``("", "done.")``: the second ring's barriers are ``done.full[i]``...)."""
    inits = sorted({e[1] for e in events[0] if e[0] == "init"})
    assert len(inits) == 2 * stages * len(rings), inits
    names = {}
    for k, prefix in enumerate(rings):
        for i, addr in enumerate(inits[2 * stages * k:2 * stages * (k + 1)]):
            names[addr] = f"{prefix}{'full' if i < stages else 'empty'}[{i % stages}]"
    return names


def ring_prefixes(manager, first: str = "ring") -> tuple[tuple, dict]:
    """For :func:`barrier_names` / :func:`model_events` of a program with several rings: the name
    prefixes in the allocator's barrier order and ``{ring name: prefix}`` (``first`` unprefixed, every
    other ring ``"<name>."``)."""
    rings = [r for r in manager.resources if getattr(r, "pipeline_config", None) is not None]
    rings.sort(key=manager.smem_allocator.barrier_offset)
    prefixes = {r.name: ("" if r.name == first else f"{r.name}.") for r in rings}
    return tuple(prefixes[r.name] for r in rings), prefixes


def init_counts(events: dict, names: dict) -> dict:
    return {names[e[1]]: e[2] for e in events[0] if e[0] == "init"}


def _merge_order(runs: list) -> list:
    """One program order of the event sites over all threads (each run is a subsequence)."""
    successors, indegree, keys = defaultdict(set), Counter(), []
    for run in runs:
        for key in run:
            if key not in indegree and key not in keys:
                keys.append(key)
                indegree[key] += 0
        for a, b in zip(run, run[1:]):
            if b not in successors[a]:
                successors[a].add(b)
                indegree[b] += 1
    ready = [k for k in keys if indegree[k] == 0]
    order = []
    while ready:
        key = ready.pop(0)
        order.append(key)
        for nxt in sorted(successors[key], key=keys.index):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    assert len(order) == len(keys), "the threads' event orders disagree"
    return order


def _target(event, rank: int) -> int:
    """The CTA an arrival lands on: a cluster arrive's recorded rank, else the thread's own CTA."""
    return event[5] if len(event) > 5 else rank


def canonical(events: dict, threads, names: dict, peers: dict | None = None, view: int = 0,
              own_rank: int | None = None) -> list:
    """The task's barrier sequence (see the module docstring) from the runs of ``threads``.

    Without ``peers`` every arrival the CTA makes counts, wherever it lands (the symmetric view).
    With ``peers`` (``{rank: events}`` of the other CTAs of the cluster, ``events`` being rank 0's)
    the sequence is the leader CTA's view: its waits and probes, and the arrivals that land on its
    barriers, from whichever CTA (a ``CtaLeader`` side acts on one CTA only); ``view`` picks another
    CTA's view (its waits, the arrivals landing on it).  ``own_rank``: ``events`` are that CTA's, and each
    arrival is named with the CTA it lands on (``full[0]@CTA1``), for a model with every CTA modelled."""
    runs, by_key = [], {}
    ranks = {0: events} if peers is None else {0: events, **peers}
    for rank, rank_events in ranks.items():
        for tid in threads:
            seen, run = Counter(), []
            for event in rank_events[tid]:
                if event[0] == "init":
                    continue
                site = (event[0], event[3] if event[0] in ("wait", "probe") else event[4])
                key = site + (seen[site],)
                seen[site] += 1
                if peers is not None and (event[0] in ("wait", "probe") and rank != view or
                                          event[0] in ("arrive", "arm") and _target(event, rank) != view):
                    continue
                run.append(key)
                by_key.setdefault(key, []).append((tid, event))
            runs.append(run)
    out, pending = [], Counter()

    def flush():
        if pending:
            out.append(("arrivals", tuple(sorted(pending.items()))))
            pending.clear()

    for key in _merge_order(runs):
        hits = by_key[key]
        kind = key[0]
        if kind in ("wait", "probe"):
            forms = {(names[e[1]], e[2]) for _, e in hits}
            assert len(forms) == 1 and len(hits) == len(list(threads)), (
                f"{kind} not executed identically by every thread of the task: {forms}, "
                f"{len(hits)} of {len(list(threads))} threads")
            flush()
            out.append((kind,) + forms.pop())
        else:
            for _, e in hits:
                where = names[e[1]] if own_rank is None else f"{names[e[1]]}@CTA{_target(e, own_rank)}"
                pending[(where, "arrivals")] += e[2]
                if e[0] == "arm":
                    pending[(where, "bytes")] += e[3]
    flush()
    return out


def model_events(process, barriers, probe_result: bool = False, prefixes: dict | None = None,
                 with_cta: bool = False) -> list:
    """The same sequence for one model process (its ops, in order; TMA copies are not barrier
    operations of the task and are left out).  ``prefixes``: ``{ring name: prefix}`` as in
    :func:`barrier_names`; ``with_cta``: arrivals are named with the CTA they land on (waits are on the
    process's own CTA), as :func:`canonical` with ``rank``."""
    out, pending = [], Counter()
    probed = set()

    def name(b, arrival=False):
        barrier = barriers[b]
        prefix = prefixes.get(barrier.resource.name, "") if prefixes else ""
        where = f"@CTA{barrier.cta}" if with_cta and arrival else ""
        return f"{prefix}{barrier.kind}[{barrier.slot}]{where}"

    def flush():
        if pending:
            out.append(("arrivals", tuple(sorted(pending.items()))))
            pending.clear()

    for op in process.ops:
        if op.probe_barrier >= 0:
            flush()
            out.append(("probe", name(op.probe_barrier), op.parity))
            if probe_result:
                probed.add(op.probe_key)
        if op.guard >= 0:
            if op.probe_key >= 0 and op.probe_key in probed:
                probed.discard(op.probe_key)
            else:
                flush()
                out.append(("wait", name(op.guard), op.parity))
        for b, n, tx in op.arrivals:
            pending[(name(b, True), "arrivals")] += n
            if tx:
                pending[(name(b, True), "bytes")] += tx
        for copy in op.spawns:           # a tcgen05.commit's arrival is issued with its op
            if copy.umma and copy.arrivals:
                pending[(name(copy.barrier, True), "arrivals")] += copy.arrivals
    flush()
    return out


# The two resources of the protocol test programs: a ring (producer fill, consumer read) and a
# sink the consumer task writes to (its dependency-graph destination).
@dataclass(kw_only=True)
class Ring(ts.MemoryResource):
    @ts.producer_work()
    def fill(self, stage_info):
        pass

    @ts.consumer_work()
    def read(self, stage_info):
        pass


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    @ts.producer_work()
    def store(self, stage_info):
        pass


@dataclass(kw_only=True)
class Done(ts.MemoryResource):
    """A signal ring without data: the waiter of a split consumer commits it after its reads, the releaser
    waits on it before releasing the data ring (check B1: the downstream proxy that orders the release)."""


def done_config(config, waiter_warps: int, releaser_warps: int):
    """The ``Done`` ring of a split consumer over the ring ``config`` (same stages and cluster): one lane per
    warp signals each side.  When the data ring's release is leader-only, every CTA's waiter commits to the
    leader (``consumer_signaling_threads=CtaLeader``); when its wait is leader-only, the leader's waiter
    commits to every CTA (``producer_signaling_threads=CtaLeader``)."""
    from tsjit.ts import protocol
    layout = dict(cta_layout_vmnk=config.cta_layout_vmnk) if config.cta_layout_vmnk else {}
    leader = ts.SignalingThreads.CtaLeader
    sides = dict(consumer_signaling_threads=leader) if protocol.leader_only(config, "release") else \
        dict(producer_signaling_threads=leader) if protocol.leader_only(config, "wait") else {}
    return ts.PipelineConfig.create_async_async_pipeline_cfg(
        config.num_stages, ts.CooperativeGroup(ts.Agent.Thread, waiter_warps),
        ts.CooperativeGroup(ts.Agent.Thread, releaser_warps), **layout, **sides)


def model_program(manager, collapse_probes: bool = False):
    """The interleaving model's program of ``manager``'s tasks (one variant, every probe its own op unless
    ``collapse_probes``) and the trips its run-time domains take (each ring wraps twice): the ``num_tiles``
    to read the IR back with."""
    from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
    from tsjit.ts.verify.exhaustive_model import compile_program
    from tsjit.ts.verify.exhaustive_regions import RegionTable
    tasks = tuple(manager.tasks)
    notes: list = []
    counts = trip_counts(tasks, 2, notes)
    (variant,) = program_variants(tasks)
    (trips,) = set(counts.values())
    return compile_program(tasks, manager.resource_dependency_graph, variant, counts, RegionTable(None), notes,
                           collapse_probes=collapse_probes), trips
