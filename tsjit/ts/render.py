"""``TaskManager.render(path)``: the pipeline as a picture (SVG).

The image has two parts:

1. the dependency graph -- one box per task (``name[warp_start:warp_end)``) and per
   resource (with its pipeline type and stage count), solid arrows resource -> task for
   what a task consumes and task -> resource for what it produces, dashed grey arrows for
   the ``resource_dependency_graph`` edges (upstream -> downstream);
2. the schedule table of the lock-step walk (the same rows as the text printout): one
   column per task, one row per round, each cell ``resource stage phase call-index``,
   coloured by role (producer / consumer / auxiliary / pipeline operation).

Below them, the exhaustive checker's summary line when it ran.

With Graphviz's ``dot`` on ``PATH`` (``engine="auto"`` or ``"dot"``) the graph is laid out
by dot and the table is an HTML-like label node of the same drawing; otherwise
(``engine="svg"``) a small self-contained writer places the boxes in columns by
dependency depth and draws the table as a grid.  Either way the file is plain SVG.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess

from tsjit.errors import UsageStateError

__all__ = ["render", "svg_document", "dot_source"]


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as XML entities (``xml.sax.saxutils.escape`` without loading urllib)."""
    return html.escape(text, quote=False)

BOX_W, BOX_H, COL_GAP, ROW_GAP, MARGIN = 190, 44, 90, 22, 20
CELL_W, CELL_H, INDEX_W = 190, 20, 44
COLOURS = {"producer": "#fde2c4", "consumer": "#d3e4f7", "aux": "#eeeeee", "op": "#fff6bf",
           "task": "#e6f2e0", "resource": "#f4f4f4"}


def _resource_label(resource) -> str:
    config = getattr(resource, "pipeline_config", None)
    kind = getattr(getattr(config, "pipeline_type", None), "value", None)
    stages = getattr(config, "num_stages", None)
    if kind is not None:
        return f"{kind}, {stages} stages"
    if getattr(resource, "is_work_queue", False):
        return "WorkQueue"
    return "barrier" if getattr(resource, "is_barrier", False) else "no pipeline"


def _ranks(manager) -> dict:
    """Column of each node: resources by dependency depth, tasks between their ends."""
    graph = manager.resource_dependency_graph
    resources = manager.resources
    depth = {id(r): 0 for r in resources}
    for _ in range(len(resources)):
        for down, ups in graph.items():
            for up in ups:
                if up is not down:
                    depth[id(down)] = max(depth[id(down)], depth.get(id(up), 0) + 1)
    ranks = {id(r): 2 * depth[id(r)] for r in resources}
    for task in manager.tasks:
        src = [ranks[id(r)] for r in task.src_resources if id(r) in ranks]
        dst = [ranks[id(r)] for r in task.dst_resources if id(r) in ranks]
        ranks[id(task)] = max(src) + 1 if src else (min(dst) - 1 if dst else 1)
    low = min(ranks.values(), default=0)
    return {k: v - low for k, v in ranks.items()}


def _cell(entry) -> tuple[str, str]:
    if entry is None:
        return "", ""
    step = entry.step
    stage = step.stage
    role = "op" if stage.is_pipeline_op else ("aux" if step.is_aux else stage.role.value)
    label = step.label or stage.op_name or stage.name
    text = f"{step.resource.name}.{label} {getattr(entry, 'phase', '')} #{step.call_index}"
    return text.strip(), role


class _Svg:
    def __init__(self):
        self.parts: list[str] = []

    def rect(self, x, y, w, h, fill, stroke="#555", rx=4):
        self.parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" '
                          f'fill="{fill}" stroke="{stroke}"/>')

    def text(self, x, y, content, size=12, anchor="middle", weight="normal"):
        self.parts.append(f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}">{escape(str(content))}</text>')

    def line(self, x1, y1, x2, y2, colour="#333", dashed=False, bend=None):
        """A straight arrow, or a curve through height ``bend`` (above or below the boxes)."""
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        marker = "dep" if dashed else "arrow"
        if bend is None:
            path = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
        else:
            path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{bend:.1f} {x2:.1f},{bend:.1f} {x2:.1f},{y2:.1f}"
        self.parts.append(f'<path d="{path}" fill="none" stroke="{colour}"{dash} '
                          f'marker-end="url(#{marker})"/>')


def _graph(svg: _Svg, manager, top: int) -> int:
    ranks = _ranks(manager)
    nodes = list(manager.resources) + list(manager.tasks)
    columns: dict = {}
    for node in nodes:
        columns.setdefault(ranks[id(node)], []).append(node)
    where = {}
    bottom = top
    for col, members in sorted(columns.items()):
        for row, node in enumerate(members):
            x = MARGIN + col * (BOX_W + COL_GAP)
            y = top + row * (BOX_H + ROW_GAP)
            where[id(node)] = (x, y)
            bottom = max(bottom, y + BOX_H)
            is_task = node in manager.tasks
            svg.rect(x, y, BOX_W, BOX_H, COLOURS["task" if is_task else "resource"],
                     rx=12 if is_task else 2)
            title = node.label if is_task else node.name
            sub = node.warps_text if is_task else _resource_label(node)
            svg.text(x + BOX_W / 2, y + 18, title, 13, weight="bold")
            svg.text(x + BOX_W / 2, y + 34, sub, 11)

    step = BOX_W + COL_GAP

    def arrow(a, b, colour, dashed=False):
        (x1, y1), (x2, y2) = where[id(a)], where[id(b)]
        if dashed or abs(x2 - x1) > step:
            # dependency edges arc below the drawing, long edges above it: no box is crossed
            if dashed:
                y1, y2, bend = y1 + BOX_H, y2 + BOX_H, bottom + 2 * ROW_GAP
            else:
                bend = top - ROW_GAP
            svg.line(x1 + BOX_W / 2, y1, x2 + BOX_W / 2, y2, colour, dashed, bend)
        elif x1 == x2:
            svg.line(x1 + BOX_W / 2, y1 + BOX_H, x2 + BOX_W / 2, y2, colour, dashed)
        elif x1 < x2:
            svg.line(x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2, colour, dashed)
        else:
            svg.line(x1, y1 + BOX_H / 2, x2 + BOX_W, y2 + BOX_H / 2, colour, dashed)

    for task in manager.tasks:
        for resource in task.src_resources:
            arrow(resource, task, "#2a6fb0")
        for resource in task.dst_resources:
            arrow(task, resource, "#c8741d")
    for down, ups in manager.resource_dependency_graph.items():
        for up in ups:
            if up is not down and id(up) in where and id(down) in where:
                arrow(up, down, "#999", dashed=True)
    svg.text(MARGIN, bottom + 2 * ROW_GAP + 16, "blue: task consumes (src_resources)   "
             "orange: task produces (dst_resources)   dashed: dependency graph edge "
             "(upstream -> downstream)", 11, anchor="start")
    return bottom + 2 * ROW_GAP + 16


def _table(svg: _Svg, manager, top: int) -> tuple[int, int]:
    tasks = manager.tasks
    simulation = manager.simulation
    rows = list(getattr(simulation, "rows", []) or [])
    svg.text(MARGIN, top + 14, "schedule table (lock-step walk, Head + Loop + Tail)", 13,
             anchor="start", weight="bold")
    y = top + 24
    svg.rect(MARGIN, y, INDEX_W, CELL_H, "#dddddd", rx=0)
    svg.text(MARGIN + INDEX_W / 2, y + 14, "step", 11)
    for col, task in enumerate(tasks):
        x = MARGIN + INDEX_W + col * CELL_W
        svg.rect(x, y, CELL_W, CELL_H, "#dddddd", rx=0)
        svg.text(x + CELL_W / 2, y + 14, task.label, 11, weight="bold")
    for number, row in enumerate(rows):
        y += CELL_H
        svg.rect(MARGIN, y, INDEX_W, CELL_H, "#ffffff", "#bbb", rx=0)
        svg.text(MARGIN + INDEX_W / 2, y + 14, number, 10)
        for col, task in enumerate(tasks):
            text, role = _cell(row.get(id(task)))
            x = MARGIN + INDEX_W + col * CELL_W
            svg.rect(x, y, CELL_W, CELL_H, COLOURS.get(role, "#ffffff"), "#bbb", rx=0)
            if text:
                svg.text(x + 4, y + 14, text[:30], 10, anchor="start")
    width = MARGIN * 2 + INDEX_W + CELL_W * len(tasks)
    return y + CELL_H, width


def svg_document(manager) -> str:
    """The self-contained SVG (no Graphviz needed)."""
    svg = _Svg()
    svg.text(MARGIN, MARGIN + 4, f"tsjit task graph: {', '.join(t.name for t in manager.tasks)}",
             15, anchor="start", weight="bold")
    graph_bottom = _graph(svg, manager, MARGIN + 20 + 2 * ROW_GAP)
    table_bottom, table_width = _table(svg, manager, graph_bottom + 30)
    result = getattr(manager, "exhaustive_result", None)
    bottom = table_bottom
    if result is not None:
        bottom += 24
        svg.text(MARGIN, bottom, result.summary(), 12, anchor="start")
    ranks = _ranks(manager)
    graph_width = MARGIN * 2 + (max(ranks.values(), default=0) + 1) * (BOX_W + COL_GAP)
    width, height = max(graph_width, table_width, 600), bottom + MARGIN
    defs = ('<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" '
            'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker>'
            '<marker id="dep" markerWidth="10" markerHeight="8" refX="9" refY="4" '
            'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#999"/></marker></defs>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="DejaVu Sans Mono, monospace">{defs}'
            f'<rect width="100%" height="100%" fill="white"/>' + "".join(svg.parts) + "</svg>")


def dot_source(manager) -> str:
    """Graphviz source: the graph plus the schedule table as an HTML-like label."""
    def node_id(obj) -> str:
        return f"n{id(obj)}"
    lines = ["digraph tsjit {", "  rankdir=LR; node [fontname=monospace, fontsize=11];"]
    for resource in manager.resources:
        label = escape(f"{resource.name}\\n{_resource_label(resource)}")
        lines.append(f'  {node_id(resource)} [shape=box, style=filled, fillcolor="#f4f4f4", '
                     f'label="{label}"];')
    for task in manager.tasks:
        label = escape(f"{task.label}\\n{task.warps_text}")
        lines.append(f'  {node_id(task)} [shape=box, style="rounded,filled", '
                     f'fillcolor="#e6f2e0", label="{label}"];')
        for resource in task.src_resources:
            lines.append(f'  {node_id(resource)} -> {node_id(task)} [color="#2a6fb0"];')
        for resource in task.dst_resources:
            lines.append(f'  {node_id(task)} -> {node_id(resource)} [color="#c8741d"];')
    for down, ups in manager.resource_dependency_graph.items():
        for up in ups:
            lines.append(f'  {node_id(up)} -> {node_id(down)} [style=dashed, color="#999"];')
    header = "".join(f"<td><b>{escape(t.label)}</b></td>" for t in manager.tasks)
    body = []
    for number, row in enumerate(getattr(manager.simulation, "rows", []) or []):
        cells = []
        for task in manager.tasks:
            text, role = _cell(row.get(id(task)))
            cells.append(f'<td bgcolor="{COLOURS.get(role, "#ffffff")}">{escape(text)}</td>')
        body.append(f"<tr><td>{number}</td>{''.join(cells)}</tr>")
    table = (f'<table border="0" cellborder="1" cellspacing="0"><tr><td>step</td>{header}</tr>'
             f'{"".join(body)}</table>')
    lines.append(f"  schedule [shape=plaintext, label=<{table}>];")
    lines.append("}")
    return "\n".join(lines)


def render(manager, path, engine: str = "auto") -> str:
    """Write the SVG to ``path`` and return the path (see the module docstring).

    Args:
        engine: ``"auto"`` (dot when installed, else the built-in writer), ``"dot"`` or
            ``"svg"`` (the built-in writer).
    """
    from tsjit.frontend import artifacts  # lazily: the TS model loads no frontend module at import
    path = os.fspath(path)
    dot = shutil.which("dot") if engine in ("auto", "dot") else None
    if engine == "dot" and dot is None:
        raise UsageStateError("TaskManager.render(engine='dot'): Graphviz 'dot' is not on PATH; "
                              "use engine='svg' (the built-in writer) or install graphviz")
    if dot is not None:
        done = subprocess.run([dot, "-Tsvg", "-o", path], input=dot_source(manager),
                              text=True, capture_output=True, timeout=60)
        if done.returncode == 0:
            artifacts.record(path)  # a disk-cache hit of the kernel writes it again
            return path
        if engine == "dot":
            raise UsageStateError(f"TaskManager.render(engine='dot'): dot failed: {done.stderr.strip()}; use "
                                  f"engine='svg' (the built-in writer)")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(svg_document(manager))
    artifacts.record(path)  # a disk-cache hit of the kernel writes it again
    return path
