"""Small program builders shared by the broken-case modules."""
from __future__ import annotations

from broken import BrokenCase
from verify_schedules import (FakeValue, GmemDest, Program, Ring, TaskSpec, async_config,
                              tma_config)

__all__ = ["PROD", "PROD_TMA", "CONS", "ring_program", "case", "twin", "ASYNC", "TMA"]

#: the correct brackets of one producer / consumer iteration.
PROD = [("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]
PROD_TMA = [("ring", "acquire"), ("ring", "tma_load"), ("ring", "commit")]
CONS = [("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")]


def ASYNC(stages: int = 4, **kw):
    """A thread-produced ring: 1 producer warp (32 threads), 4 consumer warps."""
    return lambda: async_config(stages, producers=32, consumers=128, **kw)


def TMA(stages: int = 4, **kw):
    """A TMA ring: 1 producer warp (one elected arrival), 4 consumer warps."""
    return lambda: tma_config(stages, 8192, producers=1, consumers=128, **kw)


def ring_program(config, producer, consumer, *, prod_warps=1, cons_warps=4,
                 domain=(0, 6, 1), cons_domain=None, name="ring program") -> Program:
    """A producer task ``prod`` filling ``ring`` and a consumer task ``cons`` draining it
    into ``out`` (whose stores read the ring stage they are given)."""
    def resources():
        ring = Ring(name="ring", pipeline_config=config())
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
    specs = [TaskSpec("prod", 0, prod_warps, (), ("ring",), {"loop": producer}, domain=domain),
             TaskSpec("cons", prod_warps, cons_warps, ("ring",), ("out",), {"loop": consumer},
                      domain=cons_domain or domain)]
    return Program(name, resources, specs, lambda r: {r["out"]: [r["ring"]]})


def twin(broken_program, fixed_program):
    """``build(fixed)`` from two zero-argument Program factories."""
    def build(fixed: bool):
        return (fixed_program if fixed else broken_program)().build()
    return build


def case(name, mistake, broken, fixed, **expect) -> BrokenCase:
    """``expect``: check id -> names its error must contain (see ``broken/__init__``)."""
    return BrokenCase(name, mistake, twin(broken, fixed), expect)
