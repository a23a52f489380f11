"""Stand-ins shared by the TS host tests: a dynamic device value, a Constexpr marker,
fake pipeline config and WorkQueue, and the tutorial-1 resources."""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.lang.dtypes import Boolean, Int16, Int32
from tsjit.ts import MemoryResource, TaskLocalVariable, WorkAttr, consumer_work, producer_work


class FakeValue:
    """A run-time value: arithmetic builds new FakeValues; it has no truth value, is not
    hashable and cannot be iterated, like an IR value (so the host code must never
    compare, hash or branch on one)."""

    __hash__ = None

    def __init__(self, text: str):
        self.text = text

    def _op(self, other, symbol, reverse=False):
        other_text = other.text if isinstance(other, FakeValue) else repr(other)
        a, b = (other_text, self.text) if reverse else (self.text, other_text)
        return FakeValue(f"({a} {symbol} {b})")

    def __add__(self, other): return self._op(other, "+")
    def __radd__(self, other): return self._op(other, "+", True)
    def __sub__(self, other): return self._op(other, "-")
    def __rsub__(self, other): return self._op(other, "-", True)
    def __mul__(self, other): return self._op(other, "*")
    def __rmul__(self, other): return self._op(other, "*", True)
    def __floordiv__(self, other): return self._op(other, "//")
    def __eq__(self, other): return self._op(other, "==")
    def __ne__(self, other): return self._op(other, "!=")
    def __lt__(self, other): return self._op(other, "<")
    def __getitem__(self, index): return FakeValue(f"{self.text}[...]")

    def __bool__(self):
        raise TypeError(f"run-time value {self.text} used as a Python bool")

    def __iter__(self):
        raise TypeError("run-time value is not iterable")

    def __index__(self):
        raise TypeError("run-time value used as a Python int")


class ConstexprMarker:
    """What ``tsjit.Constexpr`` will look like: a typing-like marker with a flag."""

    __tsjit_constexpr__ = True

    def __class_getitem__(cls, item):
        return cls


Constexpr = ConstexprMarker


@dataclass(frozen=True)
class FakePipelineConfig:
    num_stages: int = 2


# -- tutorial 1: grid-stride copy ---------------------------------------------------------
@dataclass(kw_only=True)
class GmemSource(MemoryResource):
    src: object
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Int16)

    @consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class GmemDest(MemoryResource):
    dst: object

    @producer_work
    def store(self, stage_info, item):
        self.dst[stage_info.loop_offset] = item


# -- richer resources ------------------------------------------------------------------------
@dataclass(kw_only=True)
class MultiSource(MemoryResource):
    """Several named consumer works, a multi-output work, an aux init and a flag."""

    a: TaskLocalVariable = TaskLocalVariable.uninitialized()
    b: TaskLocalVariable = TaskLocalVariable.uninitialized()
    flag: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.a = TaskLocalVariable(Int32, default=0)
        self.b = TaskLocalVariable(Int32, default_factory=lambda: 7)
        self.flag = TaskLocalVariable(Boolean, default=False)

    @consumer_work(returns="a")
    def tma_load(self, stage_info, *, slot: Constexpr[int] = 0):
        return 1

    @consumer_work(returns=("a", "b"))
    def load_pair(self, stage_info):
        return 1, 2

    @consumer_work(returns="flag")
    def probe(self, stage_info):
        return True

    @consumer_work(returns="a", work_attrs=WorkAttr.AUXILIARY)
    def init(self, stage_info):
        return 0

    def helper(self):
        return 3


@dataclass(kw_only=True)
class MultiDest(MemoryResource):
    @producer_work
    def store(self, stage_info, a, b=None, *, index: "Constexpr[int]"):
        pass

    @producer_work
    def store_one(self, stage_info, a):
        pass

    @producer_work(work_attrs=WorkAttr.AUXILIARY)
    def fence(self, stage_info):
        pass


@dataclass(kw_only=True)
class PipedBuffer(MemoryResource):
    """A resource with a (fake) pipeline: one producer and one consumer work."""

    value: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.value = TaskLocalVariable(Int32)

    @producer_work
    def fill(self, stage_info):
        pass

    @consumer_work(returns="value")
    def read(self, stage_info):
        return 0


@dataclass(kw_only=True)
class FakeWorkQueue(MemoryResource):
    is_work_queue = True
    work_tile: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.work_tile = TaskLocalVariable(Int32)

    @consumer_work(returns="work_tile", work_attrs=WorkAttr.AUXILIARY)
    def init_work_tile(self, stage_info):
        return 0

    @consumer_work(returns="work_tile")
    def get_and_advance_work_tile(self, stage_info):
        return 0

    def skip_work_tile_if(self, tile):
        return False


@dataclass(kw_only=True)
class Barrier(MemoryResource):
    is_barrier = True

    @consumer_work(work_attrs=WorkAttr.AUXILIARY)
    def wait_griddep(self, stage_info):
        pass


def copy_resources():
    return (GmemSource(name="src", src=FakeValue("src_ptr")),
            GmemDest(name="dst", dst=FakeValue("dst_ptr")))
