"""Command line: ``python -m tsjit demo [--size N]`` and ``python -m tsjit cache [info|clear]``.

``cache info`` counts and ``cache clear`` deletes only the files tsjit wrote (its entries and its
stale temporary files); anything else in the cache directory is left alone.  ``tsjit`` (the console
script) is the same command."""
from __future__ import annotations

import argparse
import os
import sys

#: what ``--help`` says, as plain text (the module docstring is reStructuredText)
DESCRIPTION = ("tsjit's command line: 'demo' compiles the example kernels (and runs and checks them when a GPU "
               "is present); 'cache info' counts and 'cache clear' deletes the files tsjit wrote in its on-disk "
               "kernel cache (anything else in that directory is left alone).")


def main(argv=None) -> int:
    prog = "tsjit" if os.path.basename(sys.argv[0]) == "tsjit" else "python -m tsjit"
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile the example kernels; run and check them when a GPU is present")
    demo.add_argument("--size", type=int, default=1 << 22, help="elements for the element-wise kernels")
    demo.add_argument("--gemm-size", type=int, default=4096, help="M = N = K of the GEMM run (0: skip)")
    cache = sub.add_parser("cache", help="inspect or clear the on-disk kernel cache (tsjit's own files only)")
    cache.add_argument("action", nargs="?", choices=["info", "clear"], default="info",
                       help="info (the default): directory, entries, bytes; clear: delete tsjit's files")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from tsjit.demo import run_demo  # lazily: the demo loads every example kernel
        return run_demo(size=args.size, gemm_size=args.gemm_size)
    from tsjit.runtime.cache import KernelCache  # lazily: `python -m tsjit demo` does not need it
    kc = KernelCache()
    if args.action == "info":
        info = kc.info()
        for key, value in info.items():
            print(f"{key}: {value}")
    else:
        print(f"removed {kc.clear()} tsjit cache files from {kc.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
