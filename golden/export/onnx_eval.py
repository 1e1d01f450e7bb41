"""A small evaluator of ONNX graphs, node by node, with torch operations.

onnx 1.12 has no reference evaluator (onnx.reference arrived in 1.13) and onnxruntime is not
packaged in Debian, so this runs the exported files themselves: it reads the initializers and
the nodes of the .onnx file and executes each node's op from the ONNX operator definitions
(opset 17 semantics) on torch tensors. It knows exactly the ops golden/export's graphs use (the
linter's list) and refuses any other op or attribute it does not implement, so a graph it runs
is a graph the exporter wrote, evaluated independently of the torch module it came from.
"""

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


class EvalError(Exception):
    """An op or attribute this evaluator does not implement."""


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _t(a):
    return torch.from_numpy(np.array(a).copy())


def _axes(x, axes):
    return [a % x.dim() for a in axes]


def run(model, feeds):
    """Evaluate model (a ModelProto) on feeds {input name: torch tensor}; returns {output name: tensor}."""
    env = {i.name: _t(numpy_helper.to_array(i)) for i in model.graph.initializer}
    env.update(feeds)
    env[""] = None
    for n in model.graph.node:
        a = _attrs(n)
        x = [env[i] for i in n.input]
        op = n.op_type
        if op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Max"):
            f = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Pow": torch.pow,
                 "Equal": torch.eq, "Max": torch.maximum}[op]
            y = x[0]
            for o in x[1:]:
                y = f(y, o)
            if op == "Div" and not y.is_floating_point():
                y = torch.div(x[0], x[1], rounding_mode="trunc")
            out = [y]
        elif op in ("Cos", "Sin", "Sqrt", "Tanh", "Sigmoid", "Neg", "Exp", "Reciprocal", "Not", "Identity"):
            f = {"Cos": torch.cos, "Sin": torch.sin, "Sqrt": torch.sqrt, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid,
                 "Neg": torch.neg, "Exp": torch.exp, "Reciprocal": torch.reciprocal, "Not": torch.logical_not,
                 "Identity": lambda v: v}[op]
            out = [f(x[0])]
        elif op == "MatMul":
            out = [torch.matmul(x[0], x[1])]
        elif op == "Constant":
            if "value" not in a:
                raise EvalError(f"Constant {n.name}: only the 'value' attribute is implemented")
            out = [_t(numpy_helper.to_array(a["value"]))]
        elif op == "Shape":
            if "start" in a or "end" in a:
                raise EvalError(f"Shape {n.name}: start/end not implemented")
            out = [torch.tensor(list(x[0].shape), dtype=torch.int64)]
        elif op == "Gather":
            idx = x[1]
            out = [torch.index_select(x[0], a.get("axis", 0), idx.reshape(-1)).reshape(
                *x[0].shape[:a.get("axis", 0) % x[0].dim()], *idx.shape, *x[0].shape[a.get("axis", 0) % x[0].dim() + 1:])]
        elif op == "Unsqueeze":
            y = x[0]
            for ax in sorted(int(v) % (x[0].dim() + len(x[1])) for v in x[1].tolist()):
                y = y.unsqueeze(ax)
            out = [y]
        elif op == "Concat":
            out = [torch.cat(x, dim=a["axis"])]
        elif op == "Reshape":
            shape = [int(v) for v in x[1].tolist()]
            if a.get("allowzero", 0):
                raise EvalError("Reshape allowzero=1 not implemented")
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            out = [x[0].reshape(shape)]
        elif op == "Transpose":
            out = [x[0].permute(a["perm"])]
        elif op == "Slice":
            y = x[0]
            starts, ends = x[1].tolist(), x[2].tolist()
            axes = x[3].tolist() if len(x) > 3 and x[3] is not None else list(range(len(starts)))
            steps = x[4].tolist() if len(x) > 4 and x[4] is not None else [1] * len(starts)
            for s, e, ax, st in zip(starts, ends, axes, steps):
                if st != 1:
                    raise EvalError(f"Slice {n.name}: step {st} not implemented")
                dim = y.shape[ax]
                s = max(0, min(dim, s + dim if s < 0 else s))
                e = max(0, min(dim, e + dim if e < 0 else e))
                y = y.narrow(ax % y.dim(), s, max(0, e - s))
            out = [y]
        elif op in ("ReduceMean", "ReduceSum"):
            keep = bool(a.get("keepdims", 1))
            axes = x[1].tolist() if op == "ReduceSum" and len(x) > 1 else a.get("axes")
            if axes is None:
                raise EvalError(f"{op} {n.name}: reduction over all axes not implemented")
            f = torch.mean if op == "ReduceMean" else torch.sum
            out = [f(x[0], dim=_axes(x[0], axes), keepdim=keep)]
        elif op == "Softmax":
            out = [torch.softmax(x[0], dim=a.get("axis", -1))]
        elif op == "LayerNormalization":
            ax = a.get("axis", -1) % x[0].dim()
            shape = x[0].shape[ax:]
            out = [F.layer_norm(x[0], shape, x[1], x[2] if len(x) > 2 else None, eps=a.get("epsilon", 1e-5))]
        elif op == "Where":
            out = [torch.where(x[0], x[1], x[2])]
        elif op == "Clip":
            lo = x[1] if len(x) > 1 else None
            hi = x[2] if len(x) > 2 else None
            out = [torch.clamp(x[0], min=lo, max=hi)]
        elif op == "Conv":
            if a.get("group", 1) != 1 or any(d != 1 for d in a.get("dilations", [1, 1])):
                raise EvalError(f"Conv {n.name}: groups or dilations not implemented")
            p = a.get("pads", [0, 0, 0, 0])
            if p[0] != p[2] or p[1] != p[3] or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise EvalError(f"Conv {n.name}: asymmetric or automatic padding not implemented")
            out = [F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None, stride=a.get("strides", [1, 1]), padding=p[:2])]
        elif op == "AveragePool":
            if any(a.get("pads", [0, 0, 0, 0])) or a.get("ceil_mode", 0):
                raise EvalError(f"AveragePool {n.name}: padding or ceil_mode not implemented")
            out = [F.avg_pool2d(x[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]))]
        elif op == "Pad":
            pads = x[1].tolist()
            mode = a.get("mode", b"constant")
            if mode not in (b"constant", "constant") or (len(x) > 2 and x[2] is not None and float(x[2]) != 0):
                raise EvalError(f"Pad {n.name}: only zero constant padding is implemented")
            r = len(pads) // 2
            tp = []
            for i in reversed(range(r)):
                tp += [pads[i], pads[i + r]]
            out = [F.pad(x[0], tp)]
        elif op == "Cast":
            to = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.INT64: torch.int64,
                  onnx.TensorProto.BOOL: torch.bool}.get(a["to"])
            if to is None:
                raise EvalError(f"Cast {n.name}: to {a['to']} not implemented")
            out = [x[0].to(to)]
        else:
            raise EvalError(f"op {op} ({n.name}) not implemented")
        for name, v in zip(n.output, out):
            env[name] = v
    return {o.name: env[o.name] for o in model.graph.output}
