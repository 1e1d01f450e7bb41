#!/usr/bin/env python3
"""The rank-4 linter: refuses an ONNX file QNN's converter would not take as we mean it.

It loads the model, runs onnx's shape inference (with data propagation), and fails on a graph input or output without a
static shape, on any tensor (graph inputs, outputs,
initializers, Constant nodes' values, value_info after inference) of rank > 4 or of an element
type outside ALLOWED_DTYPES, any tensor whose rank is unknown after inference, and any node
whose op (default domain only) is outside ALLOWED_OPS. The allowed ops are the ones our
graphs use and that the QAIRT ONNX converter documents; the list is deliberately short: an op
not on it is a reason to look, not proof of a problem.

Usage: /usr/bin/python3 golden/export/lint.py FILE.onnx [...]    (exit 1 on any finding)
"""

import sys

import onnx
from onnx import TensorProto, shape_inference

MAX_RANK = 4

ALLOWED_DTYPES = {
    TensorProto.FLOAT: "float32",
    TensorProto.INT64: "int64",   # shape operands of Reshape, Gather indices, Slice bounds
    TensorProto.INT32: "int32",
    TensorProto.BOOL: "bool",     # the Where condition built from the context mask
}

ALLOWED_OPS = {
    "Add", "Sub", "Mul", "Div", "Neg", "Sqrt", "Reciprocal", "Pow", "Exp", "Tanh", "Sigmoid", "Cos", "Sin",
    "MatMul", "Gemm", "Conv", "AveragePool", "Pad",
    "ReduceMean", "ReduceSum", "Softmax", "LayerNormalization", "Max", "Clip",
    "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "Unsqueeze", "Squeeze",
    "Constant", "ConstantOfShape", "Shape", "Expand", "Identity", "Cast",
    "Where", "Equal", "Not",
}


class LintError(Exception):
    """An ONNX file the linter refuses; the message lists every finding."""


def _rank_of(vi):
    t = vi.type
    if not t.HasField("tensor_type"):
        return None, None
    tt = t.tensor_type
    rank = len(tt.shape.dim) if tt.HasField("shape") else None
    return rank, tt.elem_type


def findings(model, path=None):
    """Every problem of model (an onnx.ModelProto), as strings; empty when it passes. With path, the
    checker reads the file itself (a model over 2 GB keeps its weights in external data files)."""
    out = []
    try:
        onnx.checker.check_model(path if path is not None else model)
    except onnx.checker.ValidationError as e:
        out.append(f"onnx.checker: {str(e).splitlines()[0]}")
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    g = inferred.graph

    def dtype_ok(where, name, elem):
        if elem not in ALLOWED_DTYPES:
            out.append(f"{where} {name!r}: element type {TensorProto.DataType.Name(elem)} not in "
                       f"{sorted(ALLOWED_DTYPES.values())}")

    for kind, items in (("input", g.input), ("output", g.output)):
        for vi in items:
            dims = vi.type.tensor_type.shape.dim
            if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
                out.append(f"graph {kind} {vi.name!r}: shape {[d.dim_value or d.dim_param for d in dims]} "
                           "is not static (a context binary's I/O has fixed shapes)")
    for kind, items in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
        for vi in items:
            rank, elem = _rank_of(vi)
            if rank is None:
                out.append(f"{kind} {vi.name!r}: rank unknown after shape inference")
            elif rank > MAX_RANK:
                out.append(f"{kind} {vi.name!r}: rank {rank} > {MAX_RANK}")
            if elem is not None:
                dtype_ok(kind, vi.name, elem)
    for init in g.initializer:
        if len(init.dims) > MAX_RANK:
            out.append(f"initializer {init.name!r}: rank {len(init.dims)} > {MAX_RANK}")
        dtype_ok("initializer", init.name, init.data_type)
    produced = {o for n in g.node for o in n.output}
    named = {vi.name for vi in list(g.value_info) + list(g.input) + list(g.output)} | {i.name for i in g.initializer}
    for n in g.node:
        if n.domain not in ("", "ai.onnx"):
            out.append(f"node {n.name!r}: op {n.domain}.{n.op_type} outside the default domain")
        elif n.op_type not in ALLOWED_OPS:
            out.append(f"node {n.name!r}: op {n.op_type} not in the allowed list")
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    if len(a.t.dims) > MAX_RANK:
                        out.append(f"constant {n.output[0]!r}: rank {len(a.t.dims)} > {MAX_RANK}")
                    dtype_ok("constant", n.output[0], a.t.data_type)
        if n.op_type == "Cast":
            for a in n.attribute:
                if a.name == "to":
                    dtype_ok("cast", n.output[0], a.i)
        for o in n.output:
            if o and o not in named and o in produced:
                out.append(f"node {n.name!r} output {o!r}: no shape after inference")
    return out


def lint(path):
    """Raise LintError listing every finding of the ONNX file at path; returns the loaded model."""
    model = onnx.load(path, load_external_data=False)  # shapes and types only: no weight bytes needed
    problems = findings(model, path)
    if problems:
        raise LintError(f"{path}: {len(problems)} finding(s):\n  " + "\n  ".join(problems))
    return model


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for p in argv:
        try:
            m = lint(p)
            print(f"{p}: ok ({len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers, rank <= {MAX_RANK})")
        except LintError as e:
            print(e, file=sys.stderr)
            bad += 1
        except Exception as e:  # unreadable or malformed file
            print(f"{p}: cannot lint: {e}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
