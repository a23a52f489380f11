"""The exhaustive search's :class:`Model`: a compiled program (:mod:`tsjit.ts.verify.exhaustive_model`)
plus, per op and per in-flight copy, its packed *footprint* (the barriers it arrives on / waits on, the
regions whose accesses it begins or ends, the PDL flag) and *query mask*, such that ``query(t) &
footprint(u) != 0`` exactly when t and u are dependent; the partial-order reduction of
:mod:`tsjit.ts.verify.exhaustive_search` (whose module docstring gives the dependency relation) and the
free runs of :mod:`tsjit.ts.verify.exhaustive_free_runs` read them.
"""
from __future__ import annotations

__all__ = ["Model", "copy_bits"]


def copy_bits(copy) -> tuple[int, int]:
    """(write bits, read bits) of the region an in-flight copy accesses."""
    if copy.access is None:
        return 0, 0
    bit = 1 << copy.access.region
    return (bit, 0) if copy.access.mode == "write" else (0, bit)


def _suffixes(footprints: list) -> list:
    acc, out = 0, [0] * (len(footprints) + 1)      # out[j]: the union of footprints[j:]
    for j in range(len(footprints) - 1, -1, -1):
        acc |= footprints[j]
        out[j] = acc
    return out


def _barrier_bit(copy) -> int:
    """The barrier bit of a copy's footprint: none for one that neither arrives nor lands bytes (the end
    of an MMA's reads: it changes no barrier state, its completion only ends its access)."""
    return 1 << copy.barrier if copy.arrivals or copy.nbytes else 0


class _Layout:
    """Bit offsets of the packed footprint fields."""

    def __init__(self, barriers: int, regions: int):
        self.B, self.G = barriers, regions
        self.arr, self.wt = 0, barriers
        self.wr, self.rd = 2 * barriers, 2 * barriers + regions
        self.pdl = 2 * barriers + 2 * regions
        self.kind = self.pdl + 2          # one bit per arrival kind on a barrier with several kinds


class Model:
    """The compiled program plus footprints, ready to search."""

    def __init__(self, program):
        self.program = program
        procs = program.processes
        self.procs = procs
        self.P = len(procs)
        self.B = len(program.barriers)
        self.counts = [b.count for b in program.barriers]
        self.copies = program.copies
        masks = program.regions.masks
        self.masks = masks
        self.layout = lay = _Layout(self.B, len(masks))
        self._commutative(program)
        self.no_regions = ~(((1 << (2 * lay.G)) - 1) << lay.wr)
        # per process: ops, segment bits, footprints
        self.ops = [p.ops for p in procs]
        self.seg_bits = []      # per process: list over pc of (wr bits, rd bits) active
        self.fp_run = []        # per process: footprint of op j incl. the copies it issues
        self.fp_own = []        # per process: the same, less the accesses of those copies (what its own copies see)
        self.query_own = []     # per process: query mask of op j against its own copies (segment accesses only)
        self.query = []         # per process: query mask of op j
        self.new_conf = []      # per process: (wconf, rconf) of accesses op j begins
        self.seg_conf = []      # per process: (wconf, rconf) of the segment accesses op j begins
        for proc in procs:
            segs = [proc.initial_segment] + [op.segment for op in proc.ops]
            bits = [self._access_bits(seg) for seg in segs]
            self.seg_bits.append(bits)
            fps, queries, confs, seg_confs, own_fps, own_queries = [], [], [], [], [], []
            for j, op in enumerate(proc.ops):
                ended, begun = bits[j], bits[j + 1]
                spawn_wr = spawn_rd = 0
                for copy in op.spawns:
                    if copy.access is not None:
                        if copy.access.mode == "write":
                            spawn_wr |= 1 << copy.access.region
                        else:
                            spawn_rd |= 1 << copy.access.region
                arr = kinds = others = 0
                for b, n, tx in op.arrivals:
                    arr |= 1 << b
                    kinds |= self.kind_bits.get((b, (n, tx)), 0)
                    others |= self.kind_others.get((b, (n, tx)), 0)
                wt = 0
                if op.guard >= 0:
                    wt |= 1 << op.guard
                if op.probe_barrier >= 0:
                    wt |= 1 << op.probe_barrier
                wr = ended[0] | begun[0] | spawn_wr
                rd = ended[1] | begun[1] | spawn_rd
                fp = arr | wt << lay.wt | wr << lay.wr | rd << lay.rd | op.pdl << lay.pdl | kinds
                op.footprint = fp
                run = fp
                own = arr | wt << lay.wt | (ended[0] | begun[0]) << lay.wr | (ended[1] | begun[1]) << lay.rd | \
                    op.pdl << lay.pdl | kinds
                for copy in op.spawns:
                    run |= self.copy_fp(copy)
                    own |= self.copy_fp(copy) & self.no_regions
                fps.append(run)
                own_fps.append(own)
                queries.append(self._query(arr, wt, wr, rd, op.pdl) | others)
                own_queries.append(self._query(arr, wt, ended[0] | begun[0], ended[1] | begun[1], op.pdl) | others)
                confs.append((self._conf(begun[0] | spawn_wr), self._conf(begun[1] | spawn_rd)))
                seg_confs.append((self._conf(begun[0]), self._conf(begun[1])))
            self.fp_run.append(fps)
            self.fp_own.append(own_fps)
            self.query.append(queries)
            self.query_own.append(own_queries)
            self.new_conf.append(confs)
            self.seg_conf.append(seg_confs)
        # ops that touch nothing another transition can see (no barrier, access, copy or PDL
        # flag): each is a persistent set on its own
        self.invisible = [[not fp and not q for fp, q in zip(fps, qs)]
                          for fps, qs in zip(self.fp_run, self.query)]
        # ops whose only visible effect is the PDL flag: once a PDL wait has run (the flag never
        # clears again) a wait sets it to what it is and a launch meets it set, so they are
        # invisible from then on
        pdl = ~(3 << lay.pdl)
        self.invisible_after_pdl = [[not fp & pdl and not q & pdl for fp, q in zip(fps, qs)]
                                    for fps, qs in zip(self.fp_run, self.query)]
        # per process and pc: the footprints of every op from pc on (a superset of any free run)
        self.suffix = [_suffixes(fps) for fps in self.fp_run]
        self.suffix_own = [_suffixes(fps) for fps in self.fp_own]
        self.copy_fps = [self.copy_fp(c) for c in self.copies]
        self.copy_queries = [self._query(_barrier_bit(c), 0, *copy_bits(c), 0)
                             | self.kind_others.get((c.barrier, (c.arrivals, -c.nbytes)), 0) for c in self.copies]

    def _commutative(self, program) -> None:
        kinds: dict = {}
        for proc in program.processes:
            for op in proc.ops:
                for b, n, tx in op.arrivals:
                    kinds.setdefault(b, set()).add((n, tx))
        for copy in program.copies:
            if _barrier_bit(copy):
                kinds.setdefault(copy.barrier, set()).add((copy.arrivals, -copy.nbytes))
        # two arrivals of one kind (count, bytes) on a barrier commute: either order is the same
        # state, and a violation one of them raises the other raises in the other order; arrivals
        # of different kinds do not (a phase may complete between them), so each kind of a barrier
        # with several gets a bit of its own that the other kinds' queries test
        self.kind_bits, self.kind_others = {}, {}
        bit = self.layout.kind
        for b, ks in kinds.items():
            if len(ks) > 1:
                first = bit
                for k in sorted(ks):
                    self.kind_bits[(b, k)] = 1 << bit
                    bit += 1
                every = ((1 << bit) - 1) ^ ((1 << first) - 1)
                for k in ks:
                    self.kind_others[(b, k)] = every ^ self.kind_bits[(b, k)]

    def _access_bits(self, segment) -> tuple:
        wr = rd = 0
        for access in segment:
            if access.mode == "write":
                wr |= 1 << access.region
            else:
                rd |= 1 << access.region
        return (wr, rd)

    def _conf(self, bits: int) -> int:
        out, r = 0, 0
        while bits:
            if bits & 1:
                out |= self.masks[r]
            bits >>= 1
            r += 1
        return out

    def copy_fp(self, copy) -> int:
        lay = self.layout
        wr, rd = copy_bits(copy)
        return _barrier_bit(copy) | wr << lay.wr | rd << lay.rd | \
            self.kind_bits.get((copy.barrier, (copy.arrivals, -copy.nbytes)), 0)

    def _query(self, arr, wt, wr, rd, pdl) -> int:
        lay = self.layout
        wconf, rconf = self._conf(wr), self._conf(rd)
        swapped = ((pdl & 1) << 1) | ((pdl & 2) >> 1)
        return (wt | arr << lay.wt | (wconf | rconf) << lay.wr
                | wconf << lay.rd | swapped << lay.pdl)

    # -- state -------------------------------------------------------------------------------
    def initial_state(self) -> tuple:
        bars = []
        for count in self.counts:
            bars += [0, count, 0]
        copies = sorted(c.id for p in self.procs for c in p.initial_spawns)
        return tuple([0] * self.P + [0] * self.P + bars + [0] + copies)

    def enabled(self, state, i: int) -> bool:
        op = self.ops[i][state[i]]
        if op.guard < 0:
            return True
        if op.probe_key >= 0 and state[self.P + i] >> op.probe_key & 1:
            return True
        return state[2 * self.P + 3 * op.guard] != op.parity
