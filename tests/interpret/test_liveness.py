"""tsjit.interpret.liveness: which values are live after an instruction, on a loop with phis (the shape of a
K loop whose accumulators flow through phis) and on straight-line code."""
from llvmlite import ir

from tsjit.interpret.liveness import Liveness


def _loop():
    """entry: a = 1.0 + 1.0; br loop.  loop: acc = phi [a, entry], [next, body]; i = phi ...; c = i < 4;
    br c, body, exit.  body: next = acc * 2; wait (a call); use = next + 0; i2 = i + 1; br loop.
    exit: ret acc."""
    module = ir.Module()
    f32, i32 = ir.FloatType(), ir.IntType(32)
    fn = ir.Function(module, ir.FunctionType(f32, [f32]), "k")
    wait = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "wait")
    entry, loop, body, exit_ = (fn.append_basic_block(n) for n in ("entry", "loop", "body", "exit"))
    b = ir.IRBuilder(entry)
    a = b.fadd(fn.args[0], ir.Constant(f32, 1.0), "a")
    dead = b.fadd(fn.args[0], ir.Constant(f32, 3.0), "dead")
    b.branch(loop)
    b.position_at_end(loop)
    acc = b.phi(f32, "acc")
    i = b.phi(i32, "i")
    c = b.icmp_signed("<", i, ir.Constant(i32, 4), "c")
    b.cbranch(c, body, exit_)
    b.position_at_end(body)
    nxt = b.fmul(acc, ir.Constant(f32, 2.0), "next")
    call = b.call(wait, [])
    use = b.fadd(nxt, ir.Constant(f32, 0.0), "use")
    i2 = b.add(i, ir.Constant(i32, 1), "i2")
    b.branch(loop)
    acc.add_incoming(a, entry)
    acc.add_incoming(use, body)
    i.add_incoming(ir.Constant(i32, 0), entry)
    i.add_incoming(i2, body)
    b.position_at_end(exit_)
    b.ret(acc)
    return fn, dict(a=a, dead=dead, acc=acc, i=i, c=c, next=nxt, call=call, use=use, i2=i2)


def test_live_after_a_call_in_a_loop_body():
    fn, v = _loop()
    universe = {id(x) for x in v.values()}
    live = Liveness(fn, universe)
    names = {id(x): name for name, x in v.items()}
    after = lambda instr: {names[i] for i in live.after(instr)}    # noqa: E731
    # after the wait: next (read by use), i (read by i2); acc is dead (its next value comes through the phi)
    assert after(v["call"]) == {"next", "i"}
    # after use: use and i2 flow into the phis; next is dead
    assert after(v["use"]) == {"use", "i"}
    assert after(v["i2"]) == {"use", "i2"}
    # in the entry block: a flows into the phi; dead is never read
    assert after(v["dead"]) == {"a"}
    # after the compare: acc is read on both paths (ret, next), i on the body path, c by the branch
    assert after(v["c"]) == {"acc", "i", "c"}


def test_a_universe_restricts_the_answer():
    fn, v = _loop()
    live = Liveness(fn, {id(v["next"])})
    assert live.after(v["call"]) == {id(v["next"])}
    assert live.after(v["use"]) == set()
